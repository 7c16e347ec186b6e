"""embedding-dp's row checks against the gaps the second review left (issue 47): an in-place module reached through a
pass-through module writes a layer's recorded input (the tape's sums were wrong); a backward hook rescaling rows by a
batch statistic of their directions passed the gradient check (its weights were all positive); a forward mixing only
with gradients on or only in float32 passed the float64 no-grad check; an RReLU bottom could not train."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from torch import nn

from vflpriv.common.errors import ProtocolError
from vflpriv.defenses import per_sample, row_checks
from vflpriv.defenses.embedding_dp import EmbeddingDP
from vflpriv.defenses.gaussian_message import clip_rows

from dp_sgd_helpers import assert_naive, naive, step  # noqa: E402  (tests/defenses is on the path)

PREMISE = "covers bottoms whose rows depend on their own sample only"


def _pooled(first: nn.Module, *, written: str):
    """``PooledEncoder`` whose ``written`` tower ("local": called after the cross tower) starts with ``first`` and an
    in-place ReLU; the other tower is a plain Linear."""
    from vflpriv.methods.towers import PooledEncoder

    hiding = nn.Sequential(first, nn.ReLU(inplace=True), nn.Linear(5, 3))
    plain = nn.Sequential(nn.Linear(5, 3))
    cross, local = (plain, hiding) if written == "local" else (hiding, plain)
    cross.out_dim = local.out_dim = 3
    return PooledEncoder(cross, local)


PASS_THROUGH = {"Identity": nn.Identity, "Flatten": nn.Flatten, "Sequential(Identity)": lambda: nn.Sequential(
    nn.Identity()), "Dropout(0)": lambda: nn.Dropout(0.0)}


@pytest.mark.parametrize("first", PASS_THROUGH.values(), ids=PASS_THROUGH.keys())
def test_an_in_place_module_behind_a_pass_through_leaves_the_tape_and_fails_as_autograd_does(first, monkeypatch):
    """The local tower's ReLU, behind a module returning its input, rewrote the input the cross tower's Linear had
    recorded: the tape formed a weight sum from relu(x) where autograd (the naive loop) raises. Now the tape sees the
    write (the written storage is a recorded input's) and leaves the update to torch.func, which cannot compute it
    either: the run fails with the reason."""
    torch.manual_seed(0)
    pooled = _pooled(first(), written="local")
    assert per_sample.ghost_applies(pooled)  # the container rule cannot see through the pass-through
    x, received = torch.randn(6, 5), torch.randn(6, 3)
    with pytest.raises(RuntimeError):
        naive(copy.deepcopy(pooled), x.clone(), received, sigma=0.0, clip=100.0, state=torch.get_rng_state())
    whys = []
    norms = per_sample.GhostTape.norms
    monkeypatch.setattr(per_sample.GhostTape, "norms",
                        lambda self, *a, **k: (lambda got: whys.append(self.why) or got)(norms(self, *a, **k)))
    with pytest.raises(ProtocolError, match="cannot be computed by torch.func"):
        step(pooled, x, received, sigma=0.0, clip=100.0)
    assert len(whys) == 1 and "ReLU 'local.1' wrote in place the input Linear 'cross.0' had recorded" in whys[0]


def test_an_in_place_write_before_the_layer_reads_it_keeps_the_tape_exact():
    """The cross tower (called first) writes the pooled encoder's input, which the local tower then reads: each layer
    records what it computed with, and the update equals the naive loop's, on the tape."""
    taped = []
    norms = per_sample.GhostTape.norms
    per_sample.GhostTape.norms = lambda self, *a, **k: taped.append(norms(self, *a, **k)) or taped[-1]
    try:
        assert_naive(lambda: _pooled(nn.Identity(), written="cross"), (7, 5), 3)
        assert_naive(lambda: nn.Sequential(nn.Identity(), nn.ReLU(inplace=True), nn.Linear(5, 3)), (7, 5), 3)
    finally:
        per_sample.GhostTape.norms = norms
    assert len(taped) == 2 and all(t is not None for t in taped)


def _direction_hook(m, i, out):
    """Rescales every row's gradient by a statistic of the batch's gradient directions (the mean unit row)."""
    if out.requires_grad:
        out.register_hook(lambda g: g * (1 + nn.functional.normalize(g, dim=1).mean(0).norm()))


def test_a_hook_rescaling_rows_by_a_statistic_of_their_directions_fails_the_run():
    """Any positive weights leave each row's direction, so the statistic, as it was: the check passed and the tape
    formed an update in which every sample's clipped part depended on the others (with 1 + 100 (1 - |mean unit row|)
    and aligned received gradients, replace-one moved the clipped sum by 0.33 against 2 C_g = 0.1). Halves weighted 0
    move it."""
    torch.manual_seed(0)
    bottom = nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 6))
    bottom[0].register_forward_hook(_direction_hook)
    with pytest.raises(ProtocolError, match="mixes the batch's rows"):
        step(bottom, torch.randn(9, 6), torch.randn(9, 6), sigma=0.4, clip=0.05)
    assert all(p.grad is None for p in bottom.parameters())


def test_the_gradient_check_s_weights_are_0_on_one_half_of_the_forward_check_s_halves():
    n = 9
    first, second = row_checks.gradient_weights(n, torch.zeros(1))
    (kept, other) = row_checks.halves(n, torch.device("cpu"))
    assert torch.all(first[other] == 0) and torch.all(second[kept] == 0)
    assert torch.all(first[kept] >= 0.5) and torch.all(second[other] >= 0.5)


class _Gated(nn.Module):
    """Centres its input over the batch only where ``on()`` holds (a plugin's forward)."""

    def __init__(self, on):
        super().__init__()
        self.net, self.on = nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 6)), on

    def forward(self, x):
        return self.net(x - x.mean(0) if self.on(x) else x)


GATES = {
    "gradients enabled": lambda x: torch.is_grad_enabled(),
    "float32 only": lambda x: x.dtype == torch.float32,
    "only for a batch that requires no gradient": lambda x: torch.is_grad_enabled() and not x.requires_grad,
}


@pytest.mark.parametrize("on", GATES.values(), ids=GATES.keys())
def test_a_forward_mixing_only_as_training_runs_it_fails_the_check(on):
    """The float64 no-grad forwards did not mix, so the check passed; the forward in the bottom's own dtype with
    gradients on (as the training runs it: a batch that requires no gradient, parameters that do) mixes."""
    torch.manual_seed(0)
    bottom = _Gated(on)
    assert "changed when other rows" in row_checks.forward_mixing(bottom, torch.randn(9, 6))
    with pytest.raises(ProtocolError, match=PREMISE):
        step(bottom, torch.randn(9, 6), torch.randn(9, 6), sigma=0.4, clip=0.05)


def test_the_own_dtype_check_sees_a_move_of_1e_5_of_the_batch_mean_in_float32():
    """Its tolerance is 8 float32 ulps of the row's largest entry (about 1e-6): a float32-only mixing of 1e-5 is
    seen."""
    class Small(nn.Module):
        def forward(self, x):
            return x - 1e-5 * x.mean(0) if x.dtype == torch.float32 else x

    assert "changed when other rows" in row_checks.forward_mixing(nn.Sequential(nn.Linear(6, 6), Small()),
                                                                 torch.randn(9, 6) + 3)


def test_an_rrelu_bottom_takes_the_tape_and_its_update_is_the_naive_loop_s():
    """torch.func cannot vmap ``rrelu_with_noise``: the run failed. RReLU maps row i to row i with draws of its own, so
    the tape covers it; with its slope fixed (lower = upper) the update equals the naive loop's."""
    assert per_sample.ghost_applies(nn.Sequential(nn.Linear(6, 6), nn.RReLU(), nn.Linear(6, 3)))
    assert_naive(lambda: nn.Sequential(nn.Linear(6, 6), nn.RReLU(0.2, 0.2), nn.Linear(6, 3)).train(), (9, 6), 3)


def test_an_rrelu_bottom_s_update_is_the_per_sample_gradient_of_its_own_draws():
    """With random slopes, each sample's gradient is that of its own row of the forward that drew them."""
    torch.set_default_dtype(torch.float64)
    try:
        torch.manual_seed(0)
        bottom = nn.Sequential(nn.Linear(6, 6), nn.RReLU(0.1, 0.4), nn.Linear(6, 3)).train()
        reference = copy.deepcopy(bottom)
        x, received = torch.randn(9, 6), torch.randn(9, 3)
        torch.manual_seed(5)
        fake, state = step(bottom, x, received, sigma=0.4, clip=0.05)
        torch.manual_seed(5)
        rows = reference(x)
        params = list(reference.parameters())
        total = [torch.zeros_like(p) for p in params]
        for i in range(9):
            clipped = clip_rows(rows[i:i + 1], clip=1.0)
            grads = torch.autograd.grad((clipped * received[i]).sum(), params, retain_graph=True)
            scale = min(1.0, 0.05 / float(sum(g.square().sum() for g in grads).sqrt()))
            total = [t + scale * g for t, g in zip(total, grads)]
        generator = torch.Generator()
        generator.set_state(state)
        expected = [(t + 0.4 * 0.05 * torch.randn(p.shape, generator=generator)) / 9 for t, p in zip(total, params)]
    finally:
        torch.set_default_dtype(torch.float32)
    for p, e in zip(bottom.parameters(), expected, strict=True):
        assert torch.allclose(p.grad, e, rtol=1e-9, atol=1e-12)


def test_a_plugin_rrelu_bottom_fails_its_run_with_one_reason_and_no_epsilon(monkeypatch):
    """A bottom of the plugin's own class goes to torch.func, which cannot vmap RReLU's draws: the run fails with the
    reason (the operation, what to do), no traceback, no epsilon."""
    from test_embedding_dp import _config  # noqa: E402  (a tiny splitnn run under embedding-dp)
    from vflpriv.runner.execution import run_safely

    class Plugin(nn.Module):
        def __init__(self, bottom):
            super().__init__()
            self.net, self.out_dim = nn.Sequential(bottom, nn.RReLU()), bottom.out_dim

        def forward(self, x):
            return self.net(x)

    wrap = EmbeddingDP.passive_bottom
    monkeypatch.setattr(EmbeddingDP, "passive_bottom", lambda self, party, bottom: wrap(self, party, Plugin(bottom)))
    (record,) = run_safely([_config(sigma=4.0, epochs=1)])
    assert record.status == "failed" and "Plugin cannot be computed by torch.func" in record.error
    assert "modules the tape covers" in record.error and "Traceback" not in record.error
    assert math.isnan(record.epsilon_features)


def test_rows_computed_elsewhere_are_recomputed_from_a_copy_of_the_batch_behind_a_pass_through():
    """Where the update's rows are not its wrapper's last forward, the tape runs a forward of its own on the batch: a
    ReLU(inplace=True) behind an Identity wrote the caller's batch there (the container rule did not see it)."""
    from dp_sgd_helpers import Fake
    from vflpriv.defenses.embedding_dp import PrivateRows

    bottom = nn.Sequential(nn.Identity(), nn.ReLU(inplace=True), nn.Linear(5, 3))
    wrapped = PrivateRows(bottom, clip=1.0, sigma=0.3, frozen=True, generator=torch.Generator().manual_seed(3)).train()
    x = torch.randn(6, 5)
    before = x.clone()
    EmbeddingDP.passive_backward(Fake(sigma=0.4, clip=0.05, n=6), 1, wrapped, x, torch.randn(6, 3), torch.randn(6, 3),
                                 torch.arange(6))
    assert torch.equal(x, before)


def test_an_in_place_module_reached_after_a_layer_and_behind_a_pass_through_is_watched():
    """An in-place module reached after a layer and behind an Identity, where it writes the recorded batch, is watched;
    so is one right after a layer (the third review: a hook may replace the layer's output by a recorded input)."""
    from vflpriv.methods.towers import PooledEncoder

    relu = nn.ReLU(inplace=True)
    cross = nn.Sequential(nn.Linear(5, 5), relu, nn.Linear(5, 3))
    local = nn.Sequential(nn.Identity(), relu, nn.Linear(5, 3))
    cross.out_dim = local.out_dim = 3
    tape = per_sample.GhostTape(PooledEncoder(cross, local))
    assert [m for m, _ in tape.recorders if m is relu]
    assert [m for m, _ in per_sample.GhostTape(nn.Sequential(nn.Linear(5, 5), nn.ReLU(True))).recorders
            if isinstance(m, nn.ReLU)]
    with tape:
        rows = tape.module(torch.randn(6, 5)).sum(1)
    assert tape.norms(rows, n=6) is None and "wrote in place the input Linear 'cross.0'" in tape.why
