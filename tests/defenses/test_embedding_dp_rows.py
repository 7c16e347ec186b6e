"""embedding-dp's premise, that each row a bottom sends is a function of its own sample (issue 47): a forward mixing the
batch's rows (a hook centring over the batch, even by 1e-4 of the mean, a softmax over the batch, a plugin's own
forward) or a backward mixing their gradients fails the run on either path (the tape's, torch.func's), and no epsilon
is recorded; the check runs at the first update after each ``train()``."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from vflpriv.common.errors import ProtocolError
from vflpriv.defenses import embedding_dp, per_sample, row_checks
from vflpriv.defenses.embedding_dp import EmbeddingDP, PrivateRows

from dp_sgd_helpers import Fake, step  # noqa: E402  (tests/defenses is on the path)

PREMISE = "covers bottoms whose rows depend on their own sample only"


def _mlp():
    return nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 6))


class _Centring(nn.Module):
    """A plugin bottom whose own forward centres the batch (torch.func's path)."""

    def __init__(self):
        super().__init__()
        self.net = _mlp()

    def forward(self, x):
        return self.net(x - x.mean(0))


def _hooked(register: str, where: int | None, hook):
    def build():
        bottom = _mlp()
        getattr(bottom if where is None else bottom[where], register)(hook)
        return bottom
    return build


MIXING = {  # (the bottom, whether the tape covers it)
    "a forward hook centring the first Linear's output, the mean detached": (
        _hooked("register_forward_hook", 0, lambda m, i, o: o - o.mean(0).detach()), True),
    "a forward pre-hook centring the bottom's input": (
        _hooked("register_forward_pre_hook", None, lambda m, i: (i[0] - i[0].mean(0),)), True),
    "a forward hook centring the last Linear's output": (
        _hooked("register_forward_hook", 2, lambda m, i, o: o - o.mean(0)), True),
    "a forward hook moving each row by 1e-4 of the batch's mean": (
        _hooked("register_forward_hook", 0, lambda m, i, o: o - 1e-4 * o.mean(0)), True),
    "a softmax over the batch": (lambda: nn.Sequential(nn.Linear(6, 6), nn.Softmax(dim=0)), False),
    "a plugin bottom centring its input in its own forward": (_Centring, False),
}


@pytest.mark.parametrize(("build", "taped"), MIXING.values(), ids=MIXING.keys())
def test_a_bottom_mixing_the_batch_s_rows_fails_the_run_on_either_path(build, taped):
    """The tape kept such bottoms (replace-one of a sample moved the clipped sum by 0.22 against the bound 2 C_g 0.1)
    and torch.func took a plugin's forward as given: now the update fails with the premise's reason, before any
    gradient is formed or step charged."""
    torch.manual_seed(0)
    bottom = build()
    assert per_sample.ghost_applies(bottom) == taped
    with pytest.raises(ProtocolError, match=PREMISE):
        fake, _ = step(bottom, torch.randn(9, 6), torch.randn(9, 6), sigma=0.4, clip=0.05)
    assert all(p.grad is None for p in bottom.parameters())


def test_a_backward_mixing_the_rows_gradients_fails_the_run_and_records_no_epsilon(monkeypatch):
    """A tensor hook normalising the gradient over the batch mixes nothing in the forward: the tape's gradient check
    sees it, and where it did the run recorded an epsilon (its update went to torch.func); now the run fails, with
    the reason, and no epsilon is recorded."""
    from test_embedding_dp import _config  # noqa: E402  (a tiny splitnn run under embedding-dp)
    from vflpriv.runner.execution import run_safely

    wrap = EmbeddingDP.passive_bottom

    def hooked(self, party, bottom):
        first = next(m for m in bottom.modules() if isinstance(m, nn.Linear))
        first.register_forward_hook(lambda m, i, o: o.register_hook(lambda g: g / g.norm()) and None
                                    if o.requires_grad else None)
        return wrap(self, party, bottom)

    monkeypatch.setattr(EmbeddingDP, "passive_bottom", hooked)
    (record,) = run_safely([_config(sigma=4.0, epochs=1)])
    assert record.status == "failed" and "mixes the batch's rows" in record.error and PREMISE in record.error
    assert math.isnan(record.epsilon_features)


def test_a_gradient_mixed_by_1e_4_of_the_batch_s_mean_is_seen():
    """The gradient check compares per row (the relative 1e-3 of the layer's largest entry passed this)."""
    bottom = _hooked("register_forward_hook", 0,
                     lambda m, i, o: o.register_hook(lambda g: g - 1e-4 * g.mean(0)) and None)()
    with pytest.raises(ProtocolError, match="mixes the batch's rows"):
        step(bottom, torch.randn(9, 6), torch.randn(9, 6), sigma=0.4, clip=0.05)


@pytest.mark.parametrize("size", [1e-6, 1e-8])
def test_the_forward_check_sees_a_detached_mean_moving_rows_by_a_small_fraction(size):
    """A detached mixing changes no gradient, so only the forward check can see it: per row, in float64, a move of
    1e-8 of the batch's mean is seen (a relative 1e-3 of the largest entry passed 1e-4)."""
    bottom = _hooked("register_forward_hook", 0, lambda m, i, o: o - size * o.mean(0).detach())()
    assert "changed when other rows of its batch were replaced" in row_checks.forward_mixing(bottom, torch.randn(9, 6))


def test_a_random_draw_per_row_is_not_mixing_and_one_moving_rows_is():
    """Each of the check's forwards draws from the same seeded stream: a per-row jitter draws the same numbers for a
    kept row (no mixing: each row still a function of its own sample and its own noise), a Dropout too (kept in
    training mode); a draw that picks another row's values is mixing; the global random state is as before."""
    class Jitter(nn.Module):
        def forward(self, x):
            return x + 0.1 * torch.randn_like(x)

    class Swap(nn.Module):
        def forward(self, x):
            return x[torch.randperm(x.shape[0])]

    x, dropped = torch.randn(8, 6), nn.Sequential(nn.Linear(6, 6), nn.Dropout(0.5), nn.Linear(6, 3)).train()
    jittered, swapped = nn.Sequential(_mlp(), Jitter()), nn.Sequential(_mlp(), Swap())
    state = torch.get_rng_state()
    assert row_checks.forward_mixing(jittered, x) == ""
    assert row_checks.forward_mixing(dropped, x) == "" and dropped[1].training
    assert "changed when other rows" in row_checks.forward_mixing(swapped, x)
    assert torch.equal(torch.get_rng_state(), state)


@pytest.mark.parametrize("kind", ["tabular", "image"])
def test_vflpriv_s_own_encoders_pass_the_check_in_float32(kind):
    from vflpriv.config.schema import ModelConfig
    from vflpriv.data.base import PartySpec
    from vflpriv.models.encoders import build_encoder

    spec = PartySpec(modality=kind, shape=(12,) if kind == "tabular" else (1, 16, 16))
    bottom = build_encoder(spec, ModelConfig(hidden=8, out_dim=5), generator=torch.Generator().manual_seed(0)).eval()
    assert row_checks.forward_mixing(bottom, torch.randn(7, *spec.shape) * 3) == ""


def test_the_check_runs_at_the_first_update_after_each_train(monkeypatch):
    """Checked at the first update after ``train()`` (the tape rebuilt) and not at the others: vflpriv's loop calls
    ``train()`` once a training (the text said "about one an epoch"); a hook that starts mixing later is outside what is
    checked, and the texts say so."""
    checked, calls = [], []
    forward_mixing = row_checks.forward_mixing
    monkeypatch.setattr(embedding_dp, "forward_mixing", lambda b, x, **k: checked.append(len(calls)) or forward_mixing(b, x, **k))
    wrapped = PrivateRows(_mlp(), clip=1.0, sigma=0.3, frozen=True, generator=torch.Generator().manual_seed(3)).train()
    fake = Fake(sigma=0.4, clip=0.05, n=20)
    for update in range(1, 8):
        if update == 5:
            wrapped.train()
        calls.append(update)
        x = torch.randn(8, 6)
        EmbeddingDP.passive_backward(fake, 1, wrapped, x, wrapped(x), torch.randn(8, 6), torch.arange(8))
    assert checked == [1, 5]


def test_a_frozen_conv_reading_the_batch_as_channels_fails_the_run():
    """A frozen Conv2d given a 3-D batch (n = 5 = its channels) mixes every sample into each row (the tape gave an
    update in which one sample moved the sum by up to 2nC): the run fails with the premise's reason."""
    torch.manual_seed(0)
    bottom = nn.Sequential(nn.Conv2d(5, 5, 3).requires_grad_(False), nn.Flatten(1), nn.Linear(4, 3))
    with pytest.raises(ProtocolError, match=PREMISE):
        step(bottom, torch.randn(5, 4, 4), torch.randn(5, 3), sigma=0.4, clip=0.05)
