"""The feature prior: the known samples' mean and ridge regression from the adversary's own features, chosen by the
exact leave-one-out error on the known samples (never on a target)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from feature_helpers import linear_view
from vflpriv.runner.feature_prior import PENALTIES, _standardised, compute, ridge_fit, ridge_loo


@pytest.mark.parametrize("penalty", [0.5, 7.0, math.inf])
def test_the_closed_form_leave_one_out_error_is_refitting_without_each_sample(penalty):
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(12, 4, generator=g, dtype=torch.float64), torch.rand(12, 3, generator=g, dtype=torch.float64)
    x = x - x.mean(0)
    brute = 0.0
    for i in range(12):
        keep = torch.arange(12) != i
        xs = x[keep] - x[keep].mean(0)  # the intercept refitted without sample i
        if math.isinf(penalty):
            guess = y[keep].mean(0)
        else:
            w, b = ridge_fit(xs, y[keep], penalty)
            guess = (x[i] - x[keep].mean(0)) @ w + b
        brute += float((guess - y[i]).pow(2).sum())
    assert ridge_loo(x, y, penalty) == pytest.approx(brute, rel=1e-9)


def _with_own(view, own_of):
    """``view`` whose own features are ``own_of(victim features)`` of each set (x known for the test only)."""
    return dataclasses.replace(view, own={k: own_of(v) for k, v in view.own.items()})


def test_own_features_that_determine_the_victim_s_choose_the_regressor_and_guess_it():
    view, truth = linear_view(n_aux=60, dim=3)
    g = torch.Generator().manual_seed(3)
    mix = torch.randn(3, 3, generator=g)
    xs = {"aux": view.aux_victim, **truth}
    linear = dataclasses.replace(view, own={k: xs[k] @ mix for k in view.own})
    prior = compute(linear, seed=0)
    assert prior.chosen == "regressor"
    error = (prior.of("regressor")["test"] - truth["test"]).pow(2).mean()
    assert float(error) < 1e-3  # ridge at the smallest penalty is nearly the exact inverse
    assert torch.allclose(prior.of("mean")["test"], view.aux_victim.mean(0).expand_as(truth["test"]))


def test_own_features_unrelated_to_the_victim_s_leave_the_mean():
    view, truth = linear_view(n_aux=60, dim=3)  # its own features are drawn independently of the victim's
    prior = compute(view, seed=0)
    assert prior.chosen == "mean" and math.isinf(prior.penalty)


def test_the_server_holding_no_features_has_the_mean_and_random_guesses_are_uniform():
    view, truth = linear_view(n_aux=60, dim=3)
    prior = compute(dataclasses.replace(view, own={}), seed=0)
    assert prior.chosen == "mean" and "regressor" not in prior.guesses
    guesses = prior.of("random")["test"]
    assert guesses.shape == truth["test"].shape and 0 <= float(guesses.min()) and float(guesses.max()) <= 1
    assert float(guesses.mean()) == pytest.approx(0.5, abs=0.05)
    assert torch.equal(guesses, compute(dataclasses.replace(view, own={}), seed=0).of("random")["test"])


def test_standardising_uses_the_known_samples_only():
    fit = torch.tensor([[0.0, 1.0], [2.0, 1.0]])
    out = _standardised(torch.tensor([[4.0, 3.0]]), fit)  # mean (1, 1), std (1, 0 -> 1)
    assert out.tolist() == [[3.0, 2.0]]


@pytest.mark.parametrize("noise", [0.3, 1.0, 3.0])
def test_the_chosen_penalty_has_the_lowest_leave_one_out_error_of_the_grid(noise):
    view, truth = linear_view(n_aux=30, dim=3)
    g = torch.Generator().manual_seed(5)
    own = {k: v @ torch.randn(3, 3, generator=g) for k, v in {"aux": view.aux_victim, **truth}.items()}
    own = {k: v + noise * torch.randn(v.shape, generator=g) for k, v in own.items()}
    prior = compute(dataclasses.replace(view, own=own), seed=0)
    x = _standardised(own["aux"], own["aux"])
    scale = float((torch.linalg.svdvals(x) ** 2).mean())
    errors = {a * scale: ridge_loo(x, view.aux_victim, a * scale) for a in PENALTIES}  # one decomposition each
    best = min(errors, key=lambda a: (errors[a], a))
    expected = best if errors[best] < ridge_loo(x, view.aux_victim, math.inf) else math.inf
    assert prior.penalty == pytest.approx(expected, rel=1e-9)
