"""vflpriv's fused optimizers give bit-identical trajectories to torch.optim's fused Adam and SGD."""

from __future__ import annotations

import math
import sys

import pytest
import torch
from torch import nn

from vflpriv.models.optim import FusedAdam, FusedSGD
from vflpriv.models.training import make_optimizer


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))


def _groups(model: nn.Module) -> list[dict]:
    first, rest = list(model[0].parameters()), [p for m in list(model)[1:] for p in m.parameters()]
    return [{"params": first, "lr": 0.05}, {"params": rest}]


def _train(model: nn.Module, opt, *, steps: int, freeze_head_until: int = 0) -> None:
    """Steps with a per-group cosine lr, and the head without a gradient for the first steps."""
    gen = torch.Generator().manual_seed(1)
    base = [g["lr"] for g in opt.param_groups]
    for step in range(steps):
        x, y = torch.randn(16, 6, generator=gen), torch.randint(0, 3, (16,), generator=gen)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if step < freeze_head_until:
            for p in model[3].parameters():
                p.grad = None
        for g, lr in zip(opt.param_groups, base):
            g["lr"] = lr * 0.5 * (1 + math.cos(math.pi * step / steps))
        opt.step()


def _same(a: nn.Module, b: nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


@pytest.mark.parametrize("weight_decay", [0.0, 1e-3])
def test_adam_matches_torch_fused_adam_bit_for_bit(weight_decay: float) -> None:
    ours, theirs = _model(), _model()
    _train(ours, FusedAdam(_groups(ours), lr=0.01, weight_decay=weight_decay), steps=30, freeze_head_until=5)
    _train(theirs, torch.optim.Adam(_groups(theirs), lr=0.01, weight_decay=weight_decay, fused=True), steps=30,
           freeze_head_until=5)
    assert _same(ours, theirs)
    assert not _same(ours, _model())  # it trained


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_sgd_matches_torch_fused_sgd_bit_for_bit(momentum: float) -> None:
    ours, theirs = _model(), _model()
    _train(ours, FusedSGD(_groups(ours), lr=0.1, momentum=momentum, weight_decay=3e-5), steps=30)
    _train(theirs, torch.optim.SGD(_groups(theirs), lr=0.1, momentum=momentum, weight_decay=3e-5, fused=True),
           steps=30)
    assert _same(ours, theirs)


def test_a_parameter_whose_gradient_appears_late_starts_its_momentum_from_that_gradient() -> None:
    """torch's fused SGD cannot mix first and later steps in one group; ours starts each buffer on its own."""
    a, b = nn.Parameter(torch.ones(3)), nn.Parameter(torch.ones(2))
    opt = FusedSGD([a, b], lr=0.1, momentum=0.9)
    a.grad = torch.full((3,), 2.0)
    opt.step()  # b has no gradient yet: untouched
    assert torch.equal(b.detach(), torch.ones(2)) and torch.allclose(a.detach(), torch.full((3,), 0.8))
    a.grad, b.grad = torch.full((3,), 1.0), torch.full((2,), 4.0)
    opt.step()  # a: buffer 0.9 * 2 + 1; b: buffer = its first gradient
    assert torch.allclose(a.detach(), torch.full((3,), 0.8 - 0.1 * 2.8))
    assert torch.allclose(b.detach(), torch.full((2,), 1 - 0.1 * 4.0))


def test_stepping_does_not_import_torch_dynamo() -> None:
    """The reason these classes exist: torch.optim imports torch._dynamo (~2 s) in every new process."""
    import subprocess

    code = ("import sys, torch; from vflpriv.models.training import make_optimizer\n"
            "m = torch.nn.Linear(3, 2)\n"
            "for name in ('adam', 'sgd'):\n"
            "    o = make_optimizer(m.parameters(), name=name, lr=0.1, weight_decay=0.0)\n"
            "    m(torch.randn(4, 3)).sum().backward(); o.step(); o.zero_grad()\n"
            "print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_make_optimizer_skips_frozen_parameters() -> None:
    model = _model()
    model[0].requires_grad_(False)
    opt = make_optimizer(model.parameters(), name="adam", lr=0.1, weight_decay=0.0)
    kept = {id(p) for g in opt.param_groups for p in g["params"]}
    assert kept == {id(p) for p in model.parameters() if p.requires_grad}
