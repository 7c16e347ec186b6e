"""The feature prior computed once per process and key is verified before each reuse (its key and its guesses' version
counters, no hash of them): a stored prior whose guesses
changed, another key's prior under this key, or a view whose inputs differ behind the same ids are recomputed, and
the numbers equal a cold computation's."""

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


@pytest.mark.parametrize("damage", ["guesses", "swapped", "inputs"])
def test_a_stored_prior_that_does_not_check_out_is_recomputed(computed, damage):
    view = linear_view(n_aux=40, n_test=20)[0]
    cold = feature_prior.compute(view, PLAN.seed)
    computed.clear()
    feature_prior.feature_prior(PLAN, view)
    if damage == "guesses":  # the stored guesses changed in place
        (stored,) = feature_prior._PRIORS.values()
        next(iter(next(iter(stored[0].guesses.values())).values())).add_(0.5)
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


def test_a_reuse_reads_no_stored_guess(computed, monkeypatch):
    """The check before a reuse is the key and the guesses' version counters: hashing every guess cost as much as
    computing them (0.42 against 0.40 CPU s for 369 MB of image guesses)."""
    view = linear_view(n_aux=40, n_test=20)[0]
    first = feature_prior.feature_prior(PLAN, view)
    stored = {t.data_ptr() for kind in first.guesses.values() for t in kind.values()}
    read, numpy = [], torch.Tensor.numpy
    monkeypatch.setattr(torch.Tensor, "numpy", lambda self, *a, **k: read.append(self.data_ptr()) or numpy(self, *a, **k))
    again = feature_prior.feature_prior(PLAN, view)
    assert len(computed) == 1 and again is first and not stored & set(read)
