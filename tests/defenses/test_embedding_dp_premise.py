"""embedding-dp's premise (each sent row a function of its own sample) on bottoms that are not vflpriv's own: checked on
the batch's values, it is tested, not proven, so such a bottom gets no epsilon, and the run says why (issue 47)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from vflpriv.common.errors import ProtocolError
from vflpriv.defenses import tape_checks
from vflpriv.defenses.embedding_dp import PrivateRows
from vflpriv.defenses.own_modules import foreign_part
from vflpriv.engine.hooks import DefenseChain
from vflpriv.runner.execution import run, run_safely

sys.path.insert(0, str(Path(__file__).parent))
from dp_sgd_helpers import step  # noqa: E402
from test_embedding_dp import _config  # noqa: E402


class _Impute(nn.Module):
    """Batch-mean imputation of missing entries: mixes rows only when a NaN appears (the review's e_gated.py)."""

    def forward(self, x):
        return torch.where(torch.isnan(x), torch.nanmean(x, 0, keepdim=True).expand_as(x), x)


def _prepend(monkeypatch, make) -> None:
    """Every bottom embedding-dp wraps gets ``make(bottom)`` in front of it (a plugin bottom), patched where the
    training hands the defenses its bottoms (a patched EmbeddingDP is not vflpriv's own: review final14 F5)."""
    wrap = DefenseChain.passive_bottom

    def patched(self, party, bottom):
        seq = nn.Sequential(make(bottom), bottom)
        seq.out_dim = bottom.out_dim
        return wrap(self, party, seq)

    monkeypatch.setattr(DefenseChain, "passive_bottom", patched)


def test_a_plugin_bottom_whose_mixing_the_batch_does_not_show_gets_no_epsilon_and_the_reason(monkeypatch):
    _prepend(monkeypatch, lambda bottom: _Impute())
    (record,) = run([_config(sigma=4.0, epochs=1)])
    assert record.status == "ok"
    assert math.isnan(record.epsilon_features)
    assert "no epsilon recorded" in record.notes and "not proven" in record.notes


def test_vflpriv_own_bottom_with_torch_modules_keeps_its_epsilon(monkeypatch):
    _prepend(monkeypatch, lambda bottom: nn.Identity())
    (record,) = run([_config(sigma=4.0, epochs=1)])
    assert record.status == "ok" and math.isfinite(record.epsilon_features)


def test_what_makes_a_bottom_foreign():
    assert foreign_part(nn.Sequential(nn.Linear(3, 3), nn.ReLU())) == ""
    assert "_Impute" in foreign_part(nn.Sequential(_Impute(), nn.Linear(3, 3)))
    own = nn.Linear(3, 3)
    own.forward = lambda x: x  # an instance method: the class's forward is not what runs
    assert "forward" in foreign_part(nn.Sequential(own))


class _ActNorm(nn.Module):
    """Glow's ActNorm: its first forward sets its parameters from the batch's statistics (the review's a_actnorm.py)."""

    def __init__(self, d: int):
        super().__init__()
        self.loc, self.logs = nn.Parameter(torch.zeros(d)), nn.Parameter(torch.zeros(d))
        self.register_buffer("inited", torch.tensor(0, dtype=torch.uint8))

    def forward(self, x):
        y = x.flatten(1)
        if not self.inited:
            with torch.no_grad():
                self.loc.copy_(-y.mean(0))
                self.logs.copy_(-torch.log(y.std(0) + 1e-6))
                self.inited.fill_(1)
        return ((y + self.loc) * self.logs.exp()).view(x.shape)


def test_a_bottom_setting_its_parameters_from_the_first_training_batch_fails_its_run(monkeypatch):
    _prepend(monkeypatch, lambda bottom: _ActNorm(next(m for m in bottom.modules() if isinstance(m, nn.Linear))
                                                  .in_features))
    (record,) = run_safely([_config(sigma=4.0, epochs=1)])
    assert record.status == "failed" and "changed its parameters" in record.error


def test_a_forward_that_changes_no_parameter_passes_the_first_forward_check():
    wrapped = PrivateRows(nn.Sequential(nn.Linear(4, 3), nn.ReLU()), clip=1.0, sigma=0.5, frozen=True,
                          generator=torch.Generator().manual_seed(0)).train()
    assert wrapped(torch.randn(5, 4)).shape == (5, 3)
    with pytest.raises(ProtocolError, match="changed its parameters"):
        PrivateRows(_ActNorm(4), clip=1.0, sigma=0.5, frozen=True, generator=torch.Generator().manual_seed(0)
                    ).train()(torch.randn(5, 4))


def _backward_written_buffer() -> nn.Module:
    """A forward hook registering a tensor hook that writes the batch's feature mean into the buffer the next forward
    subtracts (the review's c_bwdbuf.py): the buffer moves in the backward, after the forward checks looked."""
    torch.manual_seed(0)
    bottom = nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 3))
    bottom.register_buffer("ema", torch.zeros(6))

    def centre(m, args):
        return (args[0] - bottom.ema,)

    def store(m, args, out):
        buf, stat = bottom.ema, args[0].detach().mean(0)
        if out.requires_grad:
            out.register_hook(lambda g: (buf.mul_(0.9).add_(0.1 * stat), g)[1])

    bottom[0].register_forward_pre_hook(centre)
    bottom[0].register_forward_hook(store)
    return bottom


def test_a_buffer_written_in_the_backward_from_the_batch_is_mixing():
    x, received = torch.randn(8, 6) + 5, torch.randn(8, 3)
    assert "ema" in tape_checks.record_mixing(_backward_written_buffer(), x, received, clip=1.0, seed=3)
    plain = nn.Sequential(nn.Linear(6, 6), nn.BatchNorm1d(6).eval(), nn.ReLU(inplace=True), nn.Linear(6, 3))
    assert tape_checks.record_mixing(plain, x, received, clip=1.0, seed=3) == ""


def test_a_hook_writing_its_layer_s_recorded_input_after_the_call_fails_the_run_not_the_update():
    """The review's f_rowwrite.py: the tape read the written input, an update 103% off the true gradient, silently."""
    bottom = nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 3))

    def triple(m, inp, out):
        with torch.no_grad():
            inp[0].mul_(3.0)

    bottom[0].register_forward_hook(triple)
    with pytest.raises(ProtocolError, match="cannot be computed by torch.func"):
        step(bottom, torch.randn(8, 6), torch.randn(8, 3), sigma=0.0, clip=100.0)


def test_a_weight_reached_through_a_captured_tensor_is_a_protocol_error_naming_it():
    """The review's b_closure.py: torch.func took the captured weight for a constant; the run died in a RuntimeError."""
    bottom = nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 3))
    weight = bottom[0].weight
    bottom[2].register_forward_pre_hook(lambda m, a: (a[0] + 0.5 * a[0] @ weight.t(),))
    with pytest.raises(ProtocolError, match="outside the bottom's own attributes"):
        step(bottom, torch.randn(8, 6), torch.randn(8, 3), sigma=0.0, clip=100.0)


def test_a_torch_nn_module_that_can_mix_rows_is_foreign():
    assert "MultiheadAttention" in foreign_part(nn.Sequential(nn.MultiheadAttention(4, 1), nn.Linear(4, 3)))
    assert "max_norm" in foreign_part(nn.Sequential(nn.Embedding(5, 3, max_norm=1.0)))
    assert foreign_part(nn.Sequential(nn.Embedding(5, 3), nn.LayerNorm(3), nn.Linear(3, 2))) == ""


class _Annealed(nn.Module):
    """A temperature annealed per training forward in a Python attribute: each row its own sample's (the review's
    j_sched.py), but two forwards of one batch differ."""

    def __init__(self):
        super().__init__()
        self.net, self.calls = nn.Linear(6, 3), 0

    def forward(self, x):
        self.calls += self.training
        return self.net(x) / max(0.5, 0.99 ** self.calls)


def test_a_forward_with_a_python_schedule_is_refused_as_not_a_function_of_its_input_not_as_mixing():
    with pytest.raises(ProtocolError, match="not a function of its input and state"):
        step(_Annealed(), torch.randn(8, 6), torch.randn(8, 3), sigma=0.0, clip=0.5)
