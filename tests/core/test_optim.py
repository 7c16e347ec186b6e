"""vflpriv's optimisers give torch.optim's fused Adam and SGD bit for bit, through public torch only, with the fused
kernels' preconditions made to hold: a gradient in another layout than its parameter's, and a momentum buffer that
starts after the others'."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch import nn

from vflpriv.models.optim import FusedAdam, FusedSGD
from vflpriv.models.training import make_optimizer

ROOT = Path(__file__).resolve().parents[2]
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))


def _groups(model: nn.Module) -> list[dict]:
    first, rest = list(model[0].parameters()), [p for m in list(model)[1:] for p in m.parameters()]
    return [{"params": first, "lr": 0.05}, {"params": rest}]


def _train(model: nn.Module, opt, *, steps: int, freeze_head_until: int = 0, strided: bool = False) -> None:
    """Steps with a per-group cosine lr, the head without a gradient for the first steps, and (``strided``) every
    gradient replaced by the same values in a transposed memory layout."""
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
        if strided:
            for p in model.parameters():
                if p.grad is not None and p.grad.dim() == 2:
                    p.grad = p.grad.t().contiguous().t()  # same values, column-major: strides differ from p's
        for g, lr in zip(opt.param_groups, base):
            g["lr"] = lr * 0.5 * (1 + math.cos(math.pi * step / steps))
        opt.step()


def _same(a: nn.Module, b: nn.Module) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


@pytest.mark.parametrize("weight_decay", [0.0, 1e-3])
def test_adam_is_torch_fused_adam_bit_for_bit(weight_decay: float) -> None:
    ours, theirs = _model(), _model()
    _train(ours, FusedAdam(_groups(ours), lr=0.01, weight_decay=weight_decay), steps=30, freeze_head_until=5)
    _train(theirs, torch.optim.Adam(_groups(theirs), lr=0.01, weight_decay=weight_decay, fused=True), steps=30,
           freeze_head_until=5)
    assert _same(ours, theirs)
    assert not _same(ours, _model())  # it trained


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_sgd_is_torch_fused_sgd_bit_for_bit(momentum: float) -> None:
    ours, theirs = _model(), _model()
    _train(ours, FusedSGD(_groups(ours), lr=0.1, momentum=momentum, weight_decay=3e-5), steps=30)
    _train(theirs, torch.optim.SGD(_groups(theirs), lr=0.1, momentum=momentum, weight_decay=3e-5, fused=True),
           steps=30)
    assert _same(ours, theirs)


def test_a_parameter_whose_gradient_appears_late_starts_its_momentum_from_that_gradient() -> None:
    """torch's fused SGD cannot mix first and later steps in one group; every buffer starting at zero can."""
    a, b = nn.Parameter(torch.ones(3)), nn.Parameter(torch.ones(2))
    opt = FusedSGD([a, b], lr=0.1, momentum=0.9)
    a.grad = torch.full((3,), 2.0)
    opt.step()  # b has no gradient yet: untouched
    assert torch.equal(b.detach(), torch.ones(2)) and torch.allclose(a.detach(), torch.full((3,), 0.8))
    a.grad, b.grad = torch.full((3,), 1.0), torch.full((2,), 4.0)
    opt.step()  # a: buffer 0.9 * 2 + 1; b: buffer = its first gradient
    assert torch.allclose(a.detach(), torch.full((3,), 0.8 - 0.1 * 2.8))
    assert torch.allclose(b.detach(), torch.full((2,), 1 - 0.1 * 4.0))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["adam", "sgd"])
def test_gradients_in_another_layout_train_exactly_as_their_contiguous_copies(name: str, device: str) -> None:
    """BLI's dummy embedding gets a gradient that is a strided view; CUDA's fused kernel refuses one, so the
    optimiser copies it into the parameter's layout first, which changes no number."""
    strided, plain = _model().to(device), _model().to(device)
    _train(strided, make_optimizer(strided.parameters(), name=name, lr=0.05, weight_decay=1e-4), steps=10,
           strided=True)
    _train(plain, make_optimizer(plain.parameters(), name=name, lr=0.05, weight_decay=1e-4), steps=10)
    assert _same(strided, plain)


@pytest.mark.parametrize("make", [FusedAdam, FusedSGD])
def test_a_step_gives_a_strided_gradient_its_parameters_layout_and_leaves_others_alone(make) -> None:
    p, q = nn.Parameter(torch.zeros(4, 6)), nn.Parameter(torch.zeros(3))
    wide = torch.arange(48.0).reshape(4, 12)
    p.grad, q.grad = wide[:, :6], torch.ones(3)  # a slice of a wider gradient, as BLI's dummy embedding's
    kept = q.grad
    make([p, q], lr=0.1).step()
    assert p.grad.stride() == p.stride() and torch.equal(p.grad, wide[:, :6]) and q.grad is kept


def test_stepping_does_not_import_torch_dynamo() -> None:
    """Why not torch.optim's classes: their step imports torch._dynamo (about 1 s) in every new process."""
    import subprocess
    import sys

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


def test_no_private_torch_api_in_the_training_code() -> None:
    """``torch._fused_*``, ``torch._foreach_*`` and the like change between versions and differ between the CPU and
    CUDA (0.1's fused Adam call broke BLI on CUDA): vflpriv's packages use public torch only."""
    import re

    private = re.compile(r"\btorch\._(?!_)[A-Za-z]\w*\s*\(")
    found = [f"{path.relative_to(ROOT)}:{n}" for folder in ("vflpriv", "attacks", "defenses", "tradeoff", "reports")
             for path in (ROOT / folder).rglob("*.py")
             for n, line in enumerate(path.read_text().splitlines(), 1) if private.search(line)]
    assert not found
