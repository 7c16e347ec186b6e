"""The attacks' networks call their layers' functions directly and write out their MSE backward pass (no module
calls, no autograd graph per step): their outputs and gradients must be bit for bit those of running their layers as
modules under autograd, and fi-decoder's fit must take that path."""

from __future__ import annotations

import pytest
import torch

from vflpriv.attacks.features.surrogate import Surrogate
from vflpriv.models.decoders import MLPDecoder
from vflpriv.models.encoders import init_parameters


def _initialised(net: torch.nn.Module, g: torch.Generator) -> torch.nn.Module:
    """``net`` initialised from ``g``, LayerNorm's affine parameters moved off 1 and 0 so a skipped one shows."""
    init_parameters(net, generator=g)
    for m in net.modules():
        if isinstance(m, torch.nn.LayerNorm):
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5, generator=g)
                m.bias.uniform_(-0.5, 0.5, generator=g)
    return net


def _check(net: torch.nn.Module, x: torch.Tensor, reshape) -> None:
    _initialised(net, torch.Generator().manual_seed(0))
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


@pytest.mark.parametrize("make", [lambda: MLPDecoder(12, (1, 4, 2)), lambda: Surrogate((1, 4, 2), 12, width=16)],
                         ids=["decoder", "surrogate"])
def test_the_written_out_backward_is_autograd_s_bit_for_bit(make):
    g = torch.Generator().manual_seed(2)
    net = _initialised(make(), g)
    x = torch.randn(9, 12, generator=g) if isinstance(net, MLPDecoder) else torch.rand(9, 1, 4, 2, generator=g)
    y = torch.rand(9, *((1, 4, 2) if isinstance(net, MLPDecoder) else (12,)), generator=g)
    loss, grads = net.mse_gradients(x, y)
    expected = torch.nn.functional.mse_loss(net(x), y)
    expected.backward()
    assert torch.equal(loss, expected.detach())
    assert len(grads) == len(list(net.parameters()))
    assert all(torch.equal(a, p.grad) for a, p in zip(grads, net.parameters()))


def test_fi_decoder_s_fit_takes_the_written_out_backward_and_lands_where_autograd_does(monkeypatch):
    from vflpriv.attacks.features.decoders import fit_regression

    class Autograd(MLPDecoder):
        mse_gradients = None

    calls = []
    written_out = MLPDecoder.mse_gradients
    monkeypatch.setattr(MLPDecoder, "mse_gradients", lambda self, x, y: calls.append(1) or written_out(self, x, y))

    g = torch.Generator().manual_seed(4)
    x, y = torch.randn(29, 12, generator=g), torch.rand(29, 1, 4, 2, generator=g)
    fitted = []
    for cls in (MLPDecoder, Autograd):
        net = init_parameters(cls(12, (1, 4, 2)), generator=torch.Generator().manual_seed(5))
        fit_regression(net, x, y, epochs=5, lr=1e-2, batch_size=8, generator=torch.Generator().manual_seed(6),
                       what="decoder")
        fitted.append(torch.cat([p.detach().flatten() for p in net.parameters()]))
    assert len(calls) == 5 * 4  # every step of the first fit: 5 epochs of 4 batches
    assert torch.equal(*fitted)
