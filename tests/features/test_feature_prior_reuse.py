"""The feature prior computed once per process and key is verified before each reuse (its key and a digest of its
guesses' bytes): a stored prior whose guesses changed (in place, through ``.data`` or numpy too), another key's prior
under this key, or a view whose inputs differ behind the same ids are recomputed, and the numbers equal a cold
computation's."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from feature_helpers import linear_view
from vflpriv.runner import feature_prior
from vflpriv.runner.feature_prior import FeaturePriorPlan


@pytest.fixture
def computed(monkeypatch):
    """An empty store of priors; the computations really made, counted."""
    monkeypatch.setattr(feature_prior, "_PRIORS", {})
    made = []
    real = feature_prior.compute
    monkeypatch.setattr(feature_prior, "compute", lambda view, seed: made.append(seed) or real(view, seed))
    return made


def _same(a, b) -> bool:
    return a.chosen == b.chosen and a.penalty == b.penalty and all(
        torch.equal(a.guesses[k][n], b.guesses[k][n]) for k in a.guesses for n in a.guesses[k])


PLAN = FeaturePriorPlan(0, "training-a")


def test_a_reused_prior_is_not_recomputed_and_equals_a_cold_one(computed):
    view = linear_view(n_aux=40, n_test=20)[0]
    first = feature_prior.feature_prior(PLAN, view)
    again = feature_prior.feature_prior(PLAN, view)
    assert len(computed) == 1 and _same(first, again)


@pytest.mark.parametrize("damage", ["guesses", "data", "numpy", "swapped", "inputs"])
def test_a_stored_prior_that_does_not_check_out_is_recomputed(computed, damage):
    view = linear_view(n_aux=40, n_test=20)[0]
    cold = feature_prior.compute(view, PLAN.seed)
    computed.clear()
    feature_prior.feature_prior(PLAN, view)
    if damage in ("guesses", "data", "numpy"):  # the stored guesses changed in place (no version counter sees the last two)
        (stored,) = feature_prior._PRIORS.values()
        guess = next(iter(next(iter(stored[0].guesses.values())).values()))
        {"guesses": guess, "data": guess.data, "numpy": torch.from_numpy(guess.numpy())}[damage].add_(0.5)
    elif damage == "swapped":  # another training's prior moved under this key
        other = linear_view(n_aux=40, n_test=20, seed=1)[0]
        feature_prior.feature_prior(FeaturePriorPlan(0, "training-b"), other)
        mine, theirs = list(feature_prior._PRIORS)
        feature_prior._PRIORS[mine] = feature_prior._PRIORS[theirs]
    else:  # the same ids and shapes, other features behind them: not the stored prior's inputs
        view = dataclasses.replace(view, aux_victim=view.aux_victim.flip(0))
        cold = feature_prior.compute(view, PLAN.seed)
    made = len(computed)
    found = feature_prior.feature_prior(PLAN, view)
    assert len(computed) == made + 1 and _same(found, cold)
