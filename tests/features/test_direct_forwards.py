"""The attacks' networks call their layers' functions directly (no module-call overhead per step): their outputs and
gradients must be bit for bit those of running their layers as modules."""

from __future__ import annotations

import torch

from vflpriv.attacks.features.surrogate import Surrogate
from vflpriv.models.decoders import MLPDecoder
from vflpriv.models.encoders import init_parameters


def _check(net: torch.nn.Module, x: torch.Tensor, reshape) -> None:
    g = torch.Generator().manual_seed(0)
    init_parameters(net, generator=g)
    for m in net.modules():  # LayerNorm's affine parameters start at 1 and 0: move them so a skipped one shows
        if isinstance(m, torch.nn.LayerNorm):
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5, generator=g)
                m.bias.uniform_(-0.5, 0.5, generator=g)
    direct = net(x)
    direct.square().sum().backward()
    grads = [p.grad.clone() for p in net.parameters()]
    net.zero_grad(set_to_none=True)
    as_modules = reshape(net.net(x))
    as_modules.square().sum().backward()
    assert torch.equal(direct, as_modules)
    assert all(torch.equal(a, p.grad) for a, p in zip(grads, net.parameters()))


def test_the_decoder_computes_what_its_layers_compute():
    _check(MLPDecoder(12, (1, 4, 2)), torch.randn(9, 12, generator=torch.Generator().manual_seed(1)),
           lambda out: out.reshape(-1, 1, 4, 2))


def test_the_surrogate_computes_what_its_layers_compute():
    _check(Surrogate((1, 4, 2), 5, width=16), torch.rand(9, 1, 4, 2, generator=torch.Generator().manual_seed(1)),
           lambda out: out)
