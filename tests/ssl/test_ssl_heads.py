"""Projector and predictor layouts (REFERENCE §2)."""

import torch
from torch import nn

from vflpriv.models.ssl import predictor, projector


def _linears(m: nn.Module) -> list[nn.Linear]:
    return [layer for layer in m.modules() if isinstance(layer, nn.Linear)]


def test_projector_layout_and_shapes() -> None:
    head = projector(20)
    lin = _linears(head)
    assert [(l.in_features, l.out_features) for l in lin] == [(20, 512), (512, 512), (512, 512)]
    assert [l.bias is None for l in lin] == [True, True, False]
    assert sum(isinstance(l, nn.BatchNorm1d) for l in head.modules()) == 3
    assert sum(isinstance(l, nn.ReLU) for l in head.modules()) == 2
    assert isinstance(head[-1], nn.BatchNorm1d)
    assert head(torch.randn(4, 20, generator=torch.Generator().manual_seed(0))).shape == (4, 512)


def test_moco_projector_output_128() -> None:
    assert projector(16, hidden=32, out=128)(torch.zeros(3, 16)).shape == (3, 128)


def test_predictor_layout_and_shapes() -> None:
    head = predictor()
    lin = _linears(head)
    assert [(l.in_features, l.out_features) for l in lin] == [(512, 128), (128, 512)]
    assert lin[0].bias is None and lin[1].bias is not None
    assert isinstance(head[-1], nn.Linear)
    assert predictor(8, hidden=4)(torch.zeros(3, 8)).shape == (3, 8)
