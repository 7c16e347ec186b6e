"""Victim and adversary features a feature attack cannot be scored on are refused while planning (NaN or inf, at load:
data.base.values_problem; the min-max scale, the prior and every score would be NaN or meaningless, and such a run was
recorded "ok"); edge cases that are sound are scored as such: a constant victim column, a victim with one feature,
every victim feature constant (the prior guesses it exactly; no attack leaks beyond it)."""

from __future__ import annotations

import json
import math

import pytest

from feature_helpers import independent_dataset
from vflpriv.common.errors import DataError
from vflpriv.config.registry import DATASETS
from vflpriv.data.base import PartySpec, VerticalDataset
from vflpriv.runner.execution import run
from vflpriv.runner.planning import plan

PARTITION = {"labeled": 150, "aux": 40, "aux_features": 20}


def _variant(kind: str) -> VerticalDataset:
    ds = independent_dataset(n_train=1000, n_test=100)
    (xa, xp), (ta, tp), specs = [t.clone() for t in ds.x_train], [t.clone() for t in ds.x_test], ds.specs
    if kind == "nan-victim-train":
        xp[5, 2] = math.nan
    elif kind == "inf-victim-train":
        xp[7, 0] = math.inf
    elif kind == "nan-victim-test":
        tp[3, 1] = math.nan
    elif kind == "inf-own-test":
        ta[4, 4] = -math.inf
    elif kind == "constant-column":
        xp[:, 3], tp[:, 3] = 2.5, 2.5
    elif kind == "constant-victim":
        xp[:], tp[:] = 1.0, 1.0
    elif kind == "one-feature":
        xp, tp, specs = xp[:, :1].clone(), tp[:, :1].clone(), (specs[0], PartySpec("tabular", (1,)))
    return VerticalDataset(f"test-{kind}", (xa, xp), ds.y_train, (ta, tp), ds.y_test, 2, specs)


def _config(tiny, kind: str, attack: str = "fi-decoder"):
    DATASETS.register(f"test-{kind}", lambda **_: _variant(kind))
    return tiny(dataset={"name": f"test-{kind}"}, partition=PARTITION, attack={"name": attack, "options": {"epochs": 3}})


@pytest.mark.parametrize(("kind", "needle"), [
    ("nan-victim-train", "party 1's training features hold 1 non-finite value (first at row 5, column 2)"),
    ("inf-victim-train", "party 1's training features hold 1 non-finite value (first at row 7, column 0)"),
    ("nan-victim-test", "party 1's test features hold 1 non-finite value (first at row 3, column 1)"),
    ("inf-own-test", "party 0's test features hold 1 non-finite value (first at row 4, column 4)"),
])
def test_non_finite_features_of_the_victim_or_the_adversary_are_refused_before_training(kind, needle, tiny):
    with pytest.raises(DataError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        plan(_config(tiny, kind))


@pytest.mark.parametrize("kind", ["constant-column", "one-feature", "constant-victim"])
def test_constant_columns_and_a_single_victim_feature_are_scored_finite(kind, tiny):
    (record,) = run(_config(tiny, kind))
    assert record.status == "ok", record.error
    numbers = [record.feature_mse, record.prior_mse, record.prior_mse_mean, record.feature_mse_train, record.leakage]
    assert all(math.isfinite(v) for v in numbers), numbers
    if kind == "constant-victim":  # scaled to 0 everywhere: the known samples' mean guesses every target exactly
        assert record.prior_mse == 0.0 and record.leakage <= 0.0


def test_a_feature_prior_with_non_finite_guesses_fails_its_run_instead_of_being_scored(tiny, monkeypatch):
    from vflpriv.runner import feature_prior

    real = feature_prior.compute

    def broken(view, seed):
        prior = real(view, seed)
        prior.guesses[prior.chosen]["test"][0].fill_(math.nan)  # a prior that could not be fitted
        return prior

    monkeypatch.setattr(feature_prior, "_PRIORS", {})
    monkeypatch.setattr(feature_prior, "compute", broken)
    (record,) = run(tiny(attack={"name": "fi-decoder", "options": {"epochs": 3}}))
    assert record.status == "failed" and "feature prior" in record.error and "non-finite" in record.error


def test_a_tuning_candidate_that_diverges_is_discarded_and_the_others_are_searched(tiny):
    """A search space with a learning rate that makes the decoder diverge: the adversary sees the candidate's
    non-finite training or holdout score on its own known samples and discards it (a NaN score sorted anywhere in the
    successive halving, and a diverged training failed the whole attack)."""
    attack = {"name": "fi-decoder", "options": {"epochs": 8}, "tune": True, "search_space": {"lr": [1e30, 3e-3]}}
    (record,) = run(tiny(partition={"labeled": 100, "aux": 40, "aux_features": 24}, attack=attack))
    assert record.status == "ok", record.error
    assert json.loads(record.attack_selected) == {"lr": 3e-3}
    trials = json.loads(record.attack_trials)["trials"]
    assert any(t["options"] == {"lr": 1e30} and t["aux_accuracy"] is None and t["diverged"] for t in trials), trials


def test_a_candidate_whose_training_raises_diverged_is_discarded_with_its_reason(monkeypatch):
    from feature_helpers import linear_view
    from vflpriv.attacks.features.decoder_attack import DecoderOptions, FeatureDecoder
    from vflpriv.attacks.search import search
    from vflpriv.common.errors import DivergedError

    real = FeatureDecoder.infer

    def infer(self, view):
        if self.options.lr > 1:
            raise DivergedError("the decoder's loss became non-finite (training diverged); not scored")
        return real(self, view)

    monkeypatch.setattr(FeatureDecoder, "infer", infer)
    found = search(FeatureDecoder(DecoderOptions(epochs=2)), linear_view(n_aux=40, n_test=10)[0], budget=8, seed=0,
                   space={"lr": (1e30, 3e-3)})
    assert found.selected == {"lr": 3e-3}
    (bad,) = [t for t in found.trials if t.options == {"lr": 1e30}]
    assert bad.aux_accuracy == -math.inf and "non-finite" in bad.summary()["diverged"]
    assert bad.summary()["aux_accuracy"] is None
