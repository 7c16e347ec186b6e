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


def test_an_infinite_feature_epsilon_reads_back_infinite_from_the_store(tmp_path):
    """No finite claim (inf) is stored as such: a reloaded record does not read NaN ("no claim") beside its delta."""
    from vflpriv.store.records import RunRecord
    from vflpriv.store.sqlite import Store, read_store

    record = RunRecord(key="k", method="splitnn", dataset="digits", attack="fi-decoder", defense="embedding-dp",
                       phase="finetune", strength=1e-300, seed=0, epsilon_features=math.inf, epsilon_features_delta=1e-5,
                       leakage=-math.inf, num_classes=10)
    with Store(tmp_path / "r.sqlite") as store:
        store.put(record)
        again = store.get("k")
    (read,) = read_store(tmp_path / "r.sqlite").records
    for got in (again, read):
        assert got.epsilon_features == math.inf and got.epsilon_features_delta == 1e-5 and got.leakage == -math.inf
        assert math.isnan(got.utility)  # NaN stays "none"
