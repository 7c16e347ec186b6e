"""embedding-dp's row checks (issue 47, the second review): they leave the bottom's state as it was (parameters and
buffers of a module reached twice), run each forward from the same buffers and random stream, take integer batches,
and fail with the bottom's name; an in-place first module writes no caller's batch."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from vflpriv.common.errors import ProtocolError
from vflpriv.defenses import row_checks

from dp_sgd_helpers import naive, step  # noqa: E402  (tests/defenses is on the path)


class _Shift(nn.Module):
    """Subtracts a buffer: a module holding state that is not a parameter."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mu", torch.randn(6))

    def forward(self, x):
        return x - self.mu


def _twice(module: nn.Module) -> nn.Sequential:
    return nn.Sequential(module, nn.Linear(6, 6), module)


@pytest.mark.parametrize("build", [lambda: _twice(_Shift()), lambda: _twice(nn.BatchNorm1d(6).eval())],
                         ids=["a buffer module", "a BatchNorm in eval"])
def test_a_module_reached_twice_keeps_its_own_buffers_and_its_run_trains(build):
    """``functional_call`` left a module reached twice holding its float64 buffer clones: the next update failed."""
    torch.manual_seed(0)
    bottom = build()
    held = {k: b for k, b in bottom[0].named_buffers()}
    step(bottom, torch.randn(8, 6), torch.randn(8, 6), sigma=0.4, clip=0.05)
    assert all(b is held[k] for k, b in bottom[0].named_buffers())
    step(bottom, torch.randn(8, 6), torch.randn(8, 6), sigma=0.4, clip=0.05)  # raised on float64 buffers


@pytest.mark.parametrize("first", [lambda: nn.LeakyReLU(0.1, inplace=True), lambda: nn.ELU(inplace=True)],
                         ids=["LeakyReLU", "ELU"])
def test_an_in_place_first_module_writes_no_caller_s_batch_and_the_update_is_the_naive_loop_s(first):
    """Refused by the tape, the bottom goes to torch.func, which read the batch the training forward had overwritten."""
    torch.set_default_dtype(torch.float64)
    try:
        torch.manual_seed(1)
        bottom = nn.Sequential(first(), nn.Linear(6, 4))
        reference = copy.deepcopy(bottom)
        x, received = torch.randn(8, 6), torch.randn(8, 4)
        before = x.clone()
        _, state = step(bottom, x, received, sigma=0.4, clip=0.05)
        assert torch.equal(x, before)
        expected = naive(reference, before.clone(), received, sigma=0.4, clip=0.05, state=state)
    finally:
        torch.set_default_dtype(torch.float32)
    for p, e in zip(bottom.parameters(), expected, strict=True):
        assert torch.allclose(p.grad, e, rtol=1e-9, atol=1e-12)


def test_an_integer_batch_is_checked_without_casting_it():
    embedded = nn.Sequential(nn.Embedding(10, 4), nn.Flatten(1), nn.Linear(8, 3))
    assert row_checks.forward_mixing(embedded, torch.randint(0, 10, (8, 2))) == ""
    centred = nn.Sequential(embedded, nn.BatchNorm1d(3).train())  # batch statistics: mixing, on integer input too
    assert "changed when other rows" in row_checks.forward_mixing(centred, torch.randint(0, 10, (8, 2)))


def test_a_forward_the_check_cannot_run_fails_with_the_bottom_s_name():
    with pytest.raises(ProtocolError, match="Linear"):
        row_checks.forward_mixing(nn.Linear(6, 3), torch.randn(8, 5))


class _Dropped(nn.Module):
    """A plugin drawing its dropout mask by ``F.dropout`` in its own forward."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)

    def forward(self, x):
        return nn.functional.dropout(self.lin(x), 0.5, self.training)


class _Held(nn.Module):
    """A product with a float32 matrix held outside the module's state: the check cannot run in float64."""

    def __init__(self):
        super().__init__()
        self.matrix = torch.randn(6, 3)

    def forward(self, x):
        return torch.mm(x, self.matrix)


RANDOM = {
    "RReLU in train mode": lambda: nn.Sequential(nn.Linear(6, 6), nn.RReLU()).train(),
    "F.dropout in a plugin's forward": lambda: _Dropped().train(),
    "Dropout": lambda: nn.Sequential(nn.Linear(6, 6), nn.Dropout(0.5), nn.Linear(6, 3)).train(),
    "spectral_norm (power iteration on buffers)": lambda: nn.Sequential(
        nn.utils.spectral_norm(nn.Linear(6, 6)), nn.Tanh(), nn.Linear(6, 3)).train(),
    "spectral_norm, checked in float32": lambda: nn.Sequential(nn.utils.spectral_norm(nn.Linear(6, 6)), _Held()),
}


@pytest.mark.parametrize("build", RANDOM.values(), ids=RANDOM.keys())
def test_row_wise_draws_and_buffer_updates_are_not_mixing_and_the_bottom_records(build):
    """Each forward from fresh buffer clones and the same random stream (RReLU in eval): a kept row draws the same
    numbers; the update runs and records its step (RReLU's on the tape: torch.func cannot vmap it), the bottom's
    state and the global random state as before the check."""
    torch.manual_seed(0)
    bottom = build()
    x = torch.randn(8, 6)
    buffers = {k: b.clone() for k, b in bottom.named_buffers()}
    state = torch.get_rng_state()
    assert row_checks.forward_mixing(bottom, x) == ""
    assert torch.equal(torch.get_rng_state(), state)
    assert all(torch.equal(b, buffers[k]) for k, b in bottom.named_buffers())
    fake, _ = step(bottom, x, torch.randn(8, bottom(x).shape[1]), sigma=0.4, clip=0.05)
    assert int(fake.stepped.counts().sum()) == 8
