"""embedding-dp at a noise multiplier so small that the accountant's epsilon overflows (sigma 1e-300, a finite and
valid strength): the training's numbers are kept and no finite epsilon is claimed; the run does not fail after its
training with a ZeroDivisionError from the accountant."""

from __future__ import annotations

import math

from vflpriv.defenses.embedding_dp import gaussian_epsilon
from vflpriv.runner.execution import run


def test_the_accountant_at_a_vanishing_multiplier_gives_an_infinite_epsilon_not_an_error():
    assert gaussian_epsilon(5e-301, 10, delta=1e-5) == math.inf
    assert math.isfinite(gaussian_epsilon(0.5, 10, delta=1e-5))  # the covered range is untouched


def test_a_run_at_a_vanishing_sigma_is_scored_and_claims_no_finite_epsilon(tiny):
    defense = {"name": "embedding-dp", "strength": 1e-300, "sweep": True}
    (record,) = run(tiny(attack={"name": "fi-decoder", "options": {"epochs": 3}}, defenses=[defense]))
    assert record.status == "ok", record.error
    assert not math.isfinite(record.epsilon_features) and math.isfinite(record.feature_mse)
