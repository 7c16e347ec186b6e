"""embedding-dp's row checks against the third review's findings (issue 47): mixing that reaches a trainable layer's
recorded input or output gradient but not the rows at the checked update (a centring pre-hook on a zero-initialised
layer, a backward scaled by a forward statistic, a hook writing its layer's input after the call) gave a false epsilon
on the tape; a hook replacing a layer's output wrote a recorded input through the unwatched in-place module after it;
a buffer accumulating the features passed; rows mixed within one fixed half passed."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

from vflpriv.common.errors import ProtocolError
from vflpriv.defenses import per_sample, row_checks, tape_checks
from vflpriv.defenses.embedding_dp import PrivateRows

from dp_sgd_helpers import naive, step  # noqa: E402  (tests/defenses is on the path)

PREMISE = "covers bottoms whose rows depend on their own sample only"


def _zero_head():
    """The review's e3: the last weight zero, a pre-hook centring its input: the rows at the first update are 0 for
    every batch, but the tape's weight sum reads the centred inputs (sensitivity 3.35 against 2C_g = 1)."""
    b = nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 3, bias=False))
    nn.init.zeros_(b[2].weight)
    b[2].register_forward_pre_hook(lambda m, a: (a[0] - a[0].mean(0),))
    return b


def _forward_statistic():
    """The review's b2: the backward at the first layer's output scaled by a statistic of the forward batch, alike in
    the weighted and unweighted backwards (sensitivity 1.81)."""
    b = nn.Sequential(nn.Linear(6, 6, bias=False), nn.Tanh(), nn.Linear(6, 3))

    def hook(m, inp, out):
        if out.requires_grad:
            stat = out.detach().mean(0).norm()
            out.register_hook(lambda g: g * (1 + 1e3 * stat ** 2))

    b[0].register_forward_hook(hook)
    return b


def _input_written():
    """The review's a_hookwrite: a forward hook writing its layer's input in place after the call (sensitivity 2.69)."""
    b = nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 3))

    def hook(m, inp, out):
        with torch.no_grad():
            inp[0].add_(50 * inp[0].mean(0))

    b[0].register_forward_hook(hook)
    return b


HIDDEN = {"centring pre-hook on a zero-initialised layer": _zero_head, "backward scaled by a forward statistic":
          _forward_statistic, "hook writing its layer's input after the call": _input_written}


@pytest.mark.parametrize("build", HIDDEN.values(), ids=HIDDEN.keys())
def test_mixing_seen_only_in_the_tape_s_records_fails_the_run(build):
    """Both earlier checks passed each of these (the rows and their gradients at the checked update look the samples'
    own) while the tape's update moved by more than 2C_g when one sample was replaced; the records check compares each
    kept row's recorded input and output gradient at every trainable layer in the probes with the batch's."""
    torch.manual_seed(0)
    bottom = build()
    torch.manual_seed(1)
    x = torch.randn(8, 6)
    assert row_checks.forward_mixing(bottom, x) == ""  # the rows alone do not show it
    with pytest.raises(ProtocolError, match=PREMISE):
        step(bottom, x, torch.randn(8, 3), sigma=0.0, clip=0.5)


def test_the_records_check_passes_vflpriv_s_blocks_and_an_in_place_relu():
    """No false alarm in float32: a plain Linear, ReLU(inplace=True), Linear, and vflpriv's block (Linear, BatchNorm1d,
    ReLU(inplace=True)) before a Linear, train."""
    torch.manual_seed(0)
    for bottom in (nn.Sequential(nn.Linear(6, 6), nn.ReLU(inplace=True), nn.Linear(6, 3)),
                   nn.Sequential(nn.Linear(6, 6), nn.BatchNorm1d(6), nn.ReLU(inplace=True), nn.Linear(6, 3))):
        x = torch.randn(16, 6)
        fake, _ = step(bottom, x, torch.randn(16, 3), sigma=0.4, clip=0.05)
        assert int(fake.stepped.counts().sum()) == 16


def _bypassed_gate():
    """The review's c2: a frozen Linear whose forward hook returns its input, then ReLU(inplace=True) in
    ``PooledEncoder``'s local tower: the ReLU writes the batch the cross tower's Linear recorded."""
    from vflpriv.methods.towers import PooledEncoder

    gate = nn.Linear(5, 5).requires_grad_(False)
    gate.register_forward_hook(lambda m, i, o: i[0])
    cross, local = nn.Sequential(nn.Linear(5, 3)), nn.Sequential(gate, nn.ReLU(inplace=True), nn.Linear(5, 3))
    cross.out_dim = local.out_dim = 3
    return PooledEncoder(cross, local)


def test_an_in_place_module_after_a_layer_whose_output_a_hook_replaced_leaves_the_tape():
    """The Sequential exemption trusted a layer's output to be new: the tape trained silently with an update 44% off,
    where autograd (the naive loop) raises. Every in-place module is watched now: the write is seen and the update
    goes to torch.func, which fails the run as autograd does."""
    torch.manual_seed(0)
    bottom = _bypassed_gate()
    x, received = torch.randn(6, 5) * 3, torch.randn(6, 3) * 3
    with pytest.raises(RuntimeError):
        naive(_bypassed_gate(), x.clone(), received, sigma=0.0, clip=100.0, state=torch.get_rng_state())
    assert any(isinstance(m, nn.ReLU) for m, _ in per_sample.GhostTape(bottom).recorders)
    with pytest.raises(ProtocolError, match="cannot be computed by torch.func"):
        step(bottom, x, received, sigma=0.0, clip=100.0)


class _RunningNorm(nn.Module):
    """The review's h_running: subtracts a running mean of earlier batches' features, updated from each batch."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(6))
        self.net = nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 3))

    def forward(self, x):
        out = self.net(x - self.mean)
        if self.training and torch.is_grad_enabled():
            self.mean = 0.9 * self.mean + 0.1 * x.detach().mean(0)
        return out


def test_a_buffer_whose_new_value_depends_on_the_batch_fails_the_run():
    """Each check forward started from fresh buffer clones, so a running mean of the features passed: later rows
    depended on earlier samples outside the mechanism. The buffers' new values are compared between the batch and the
    probes; spectral_norm's power iteration (a function of the weight) still passes (test_embedding_dp_row_state)."""
    torch.manual_seed(0)
    bottom = _RunningNorm().train()
    x = torch.randn(8, 6) + 5
    assert "buffer 'mean'" in row_checks.forward_mixing(bottom, x, seed=3)
    with pytest.raises(ProtocolError, match=PREMISE):
        step(bottom, x, torch.randn(8, 3), sigma=0.4, clip=0.5)


class _PairPooled(nn.Module):
    """The review's g_pair: a plugin averaging the batch's first two rows (torch.func's path: no gradient check)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 3))

    def forward(self, x):
        o = self.net(x)
        return torch.cat([o[:2].mean(0, keepdim=True).expand(min(2, o.shape[0]), -1), o[2:]])


@pytest.mark.parametrize("n", [8, 16, 128])
def test_a_pair_of_rows_mixed_is_seen_at_every_batch_size(n):
    """The halves were fixed by n: rows 0 and 1 fell in the same half at n = 8, 16, 128 and their pooling passed."""
    torch.manual_seed(0)
    assert "changed when other rows" in row_checks.forward_mixing(_PairPooled(), torch.randn(n, 6), seed=0)


@pytest.mark.parametrize("seed", [0, 1, 12345])
def test_the_probes_separate_every_pair_of_rows_and_follow_the_seed(seed):
    """Constant-weight probes: every ordered pair of rows is kept apart in some probe (one kept, the other replaced),
    with the fewest probes that can (8 at n = 64 and 10 at n = 128, where the rank's bits took 12 and 14); the
    permutation comes from the run's seed."""
    for n in (2, 3, 7, 8, 33, 64, 70, 71, 128):
        kept = row_checks.probes(n, seed=seed, device=torch.device("cpu"))
        assert len(kept) <= row_checks.probe_count(n)
        sets = [set(k.tolist()) for k in kept]
        for i, j in itertools.permutations(range(n), 2):
            assert any(i in s and j not in s for s in sets), (n, i, j)
    assert [len(row_checks.probes(n, seed=seed, device=torch.device("cpu"))) for n in (64, 128)] == [8, 10]
    a, b = (row_checks.probes(64, seed=s, device=torch.device("cpu")) for s in (seed, seed + 1))
    assert not all(torch.equal(p, q) for p, q in zip(a, b))


class _PairMix(nn.Module):
    """Row i's output gets row j's added: a mixing confined to one ordered pair of rows."""

    def __init__(self, i: int, j: int):
        super().__init__()
        self.lin, self.i, self.j = nn.Linear(4, 3), i, j

    def forward(self, x):
        h = self.lin(x)
        return h + (torch.arange(x.shape[0]) == self.i)[:, None] * h[self.j]


def test_a_replaced_row_takes_a_kept_row_of_another_value_so_duplicates_hide_no_pair():
    """On a batch whose rows repeat (4 values in 64 rows), a replaced row copied from an equal kept row changed nothing:
    the pair (15 kept, 24 replaced), kept apart by one probe only, was missed. Each replaced row now takes a kept row
    of another value wherever one exists, in x and in the rows received alike."""
    x = torch.randn(4, 4, generator=torch.Generator().manual_seed(0))[
        torch.randint(4, (64,), generator=torch.Generator().manual_seed(1))]
    kept = row_checks.probes(64, seed=0, device=torch.device("cpu"))
    received = torch.arange(64.0)[:, None]
    for rows, probe, got in zip(kept, row_checks.probe_batches(x, kept),
                                row_checks.probe_batches(received, kept, chosen_by=x)):
        assert torch.equal(probe[rows], x[rows])
        replaced = torch.ones(64, dtype=torch.bool)
        replaced[rows] = False
        sources = got[replaced, 0].long()  # the kept row each replaced row was copied from
        assert torch.equal(probe[replaced], x[sources])
        other_value = [bool((x[rows] != x[j]).any(1).any()) for j in replaced.nonzero().flatten().tolist()]
        assert all(not torch.equal(x[j], x[s]) for j, s, o in zip(replaced.nonzero().flatten().tolist(),
                                                                     sources.tolist(), other_value) if o)
    torch.manual_seed(0)
    assert "output row 15 changed" in row_checks.forward_mixing(_PairMix(15, 24), x, seed=0, as_trained=False)


def test_a_batch_of_one_row_does_not_use_up_the_training_s_check():
    """check_due consumed the only check on a batch of one row, where nothing can be compared."""
    wrapped = PrivateRows(nn.Linear(6, 3), clip=1.0, sigma=0.3, frozen=True,
                          generator=torch.Generator().manual_seed(3)).train()
    assert not wrapped.check_due(torch.ones(1, 6))
    assert wrapped.check_due(torch.arange(48.0).view(8, 6)) and not wrapped.check_due(torch.arange(48.0).view(8, 6))


def test_a_batch_of_equal_rows_does_not_use_up_the_training_s_check():
    """Review rvlead F3: with every row equal each probe is the batch, so nothing is compared, yet the check was used
    up: a bottom centring over its batch got rows_checked and a test-row epsilon."""
    wrapped = PrivateRows(nn.Linear(6, 3), clip=1.0, sigma=0.3, frozen=True,
                          generator=torch.Generator().manual_seed(3)).train()
    assert not wrapped.check_due(torch.ones(64, 6))
    x = torch.ones(64, 6)
    x[5, 2] = 0.5
    assert wrapped.check_due(x)


class _Counting(nn.Module):
    """A plugin whose forward writes its parameter in place (a counter): the checks' forwards must not move it."""

    def __init__(self):
        super().__init__()
        self.net, self.count = nn.Linear(6, 3), nn.Parameter(torch.zeros(()))

    def forward(self, x):
        with torch.no_grad():
            self.count.add_(1)
        return self.net(x) + 0 * self.count


def test_the_checks_forwards_write_no_real_parameter():
    """The as-trained forwards ran on the real parameters' storage: an in-place write in a forward ran once per check
    forward (3 to 6 extra times) on the parameter the training updates."""
    torch.manual_seed(0)
    bottom = _Counting()
    x = torch.randn(8, 6)
    for as_trained in (True, False):
        row_checks.forward_mixing(bottom, x, seed=1, as_trained=as_trained)
    assert float(bottom.count.detach()) == 0
    with pytest.raises(ProtocolError, match="changed its parameters"):  # a parameter written in a forward: refused
        step(bottom, x, torch.randn(8, 3), sigma=0.4, clip=0.5)
    assert float(bottom.count.detach()) == 1  # the training's forward, none of the checks'
    taped = nn.Sequential(nn.Linear(6, 3))
    taped[0].register_forward_hook(lambda m, i, o: [m.bias.data.add_(1)] and None)  # on the tape: writing its bias
    assert tape_checks.record_mixing(taped, x, torch.randn(8, 3), clip=1.0, seed=1) == ""
    assert float(taped[0].bias.detach().abs().max()) < 1


def test_a_run_whose_bottom_mixes_only_into_the_tape_s_records_fails_with_no_epsilon(monkeypatch):
    """The review's end to end case: a tiny splitnn run whose bottom ends in a zero-initialised head behind a centring
    pre-hook ended ``ok`` with epsilon_features 3.19, every update on the tape; now it fails with the reason."""
    import math

    from test_embedding_dp import _config  # noqa: E402  (a tiny splitnn run under embedding-dp)
    from vflpriv.defenses.embedding_dp import EmbeddingDP
    from vflpriv.runner.execution import run_safely

    def headed(self, party, bottom):
        head = nn.Linear(bottom.out_dim, bottom.out_dim)
        nn.init.zeros_(head.weight)
        head.register_forward_pre_hook(lambda m, a: (a[0] - a[0].mean(0),))
        seq = nn.Sequential(bottom, head)
        seq.out_dim = bottom.out_dim
        return wrap(self, party, seq)

    wrap = EmbeddingDP.passive_bottom
    monkeypatch.setattr(EmbeddingDP, "passive_bottom", headed)
    (record,) = run_safely([_config(sigma=4.0, epochs=1)])
    assert record.status == "failed" and "mixes the batch's rows" in record.error and PREMISE in record.error
    assert "Traceback" not in record.error and math.isnan(record.epsilon_features)


def test_equal_rows_holding_a_nan_do_not_use_up_the_check_either():
    """Review rvlead2 G3: NaN never equals NaN, so equal rows holding one counted as distinct and used up the check."""
    wrapped = PrivateRows(nn.Linear(6, 3), clip=1.0, sigma=0.3, frozen=True,
                          generator=torch.Generator().manual_seed(3)).train()
    x = torch.ones(16, 6)
    x[:, 2] = float("nan")
    assert not wrapped.check_due(x)
