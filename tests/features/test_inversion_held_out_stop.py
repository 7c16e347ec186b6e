"""fi-inversion's ``stop: held-out``: the step is chosen on a quarter of the adversary's known samples inverted beside
the targets (the decoder and the surrogate fitted on the rest), never on a target; ``last`` is the plain inversion."""

from __future__ import annotations

import torch
from torch import nn

from feature_helpers import linear_view
from vflpriv.attacks.features import inversion
from vflpriv.attacks.features.inversion import STEP_HOLDOUT, FeatureInversion, InversionOptions


def _walk():
    """A surrogate and one set of rows that pull the reconstructions from their start to ``end``."""
    g = torch.Generator().manual_seed(0)
    surrogate = nn.Linear(4, 4).requires_grad_(False)
    with torch.no_grad():
        surrogate.weight.copy_(torch.eye(4)), surrogate.bias.zero_()
    start, end = torch.full((5, 4), 0.2), torch.rand(5, 4, generator=g) * 0.5 + 0.5
    return surrogate, start, end


def test_the_targets_are_kept_at_the_step_where_the_watched_set_s_error_is_lowest():
    surrogate, start, end = _walk()
    attack = FeatureInversion(InversionOptions(steps=40, lr=0.05))
    free = attack._invert(surrogate, [start, start], [end, end], image=False)
    assert (free[0] - end).abs().mean() < (start - end).abs().mean()  # the inversion walks towards the rows
    # the watched set's truth is the start: its error only grows, so every set is kept at step 0
    kept = attack._invert(surrogate, [start, start], [end, end], image=False, watch=(1, start))
    assert torch.equal(kept[0], start) and torch.equal(kept[1], start)
    # its truth is where the walk ends: the last step is kept, as without watching
    last = attack._invert(surrogate, [start, start], [end, end], image=False, watch=(1, free[1]))
    assert torch.equal(last[0], free[0])


def test_held_out_fits_on_three_quarters_of_the_known_samples_and_returns_only_the_targets(monkeypatch):
    view, truth = linear_view(n_aux=40, n_test=30)
    fitted = []
    real = inversion.fit_surrogate

    def spy(v, **kwargs):
        assert v.received["aux"].shape[0] == v.aux_victim.shape[0]
        fitted.append((v.aux_victim.shape[0], STEP_HOLDOUT in v.received))
        return real(v, **kwargs)

    monkeypatch.setattr(inversion, "fit_surrogate", spy)
    options = dict(steps=5, surrogate_epochs=2, decoder_epochs=2)
    found = FeatureInversion(InversionOptions(stop="held-out", **options)).infer(view)
    assert fitted == [(30, True)] and set(found) == {"train", "test"}
    assert found["test"].features.shape == truth["test"].shape
    FeatureInversion(InversionOptions(**options)).infer(view)
    assert fitted[1] == (40, False)  # ``last``: every known pair
