"""Review hunt H6: a record's epsilon was never checked against what its defenses can claim: a feature epsilon on an
undefended or nopeek record, a label epsilon on an embedding-dp one, an epsilon without its delta were tabled as
claims. Such a record is damaged: left out of the tables with a warning, recomputed on resume. (An epsilon lowered
by hand: tests/reports/test_recomputed_epsilons.py.)"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from vflpriv.config.sweep import ExperimentConfig
from vflpriv.defenses.embedding_dp import EmbeddingDP
from vflpriv.defenses.embedding_dp_accounting import gaussian_epsilon
from vflpriv.reports.results import load_results
from vflpriv.runner.execution import blank_record
from vflpriv.store.sqlite import Store
from vflpriv.tradeoff.sweep import drop_damaged


def _run(defense: str | None, seed: int = 0):
    defenses = [{"name": defense, "sweep": True}] if defense else []
    return ExperimentConfig.model_validate({"attack": {"name": "fi-decoder"}, "defenses": defenses, "seeds": [seed],
                                            **({"strengths": [0.5]} if defense else {})}).runs()[0]


def _record(defense: str | None, seed: int = 0, **claims):
    """A scored feature record as the runner writes it, with ``claims``."""
    return replace(blank_record(_run(defense, seed)), num_classes=10, utility=0.8, status="n/a", **claims)


FEATURE_EPSILON = {"epsilon_features": 0.5, "epsilon_features_delta": 1e-5}
#: embedding-dp's feature claim at sigma 0.5 as a run writes it, with its entry: the worst row's 20 releases and 20
#: DP-SGD steps (the default 20 epochs).
GENUINE = {"epsilon_features": gaussian_epsilon(0.25, 40, delta=1e-5), "epsilon_features_delta": 1e-5,
           "epsilon_accounting": json.dumps([{"defense": 0, "revision": EmbeddingDP.revision, "secret": "features",
                                              "count": 40}])}
EDITS = {"feature epsilon undefended": (None, FEATURE_EPSILON, "it is undefended and carries an epsilon_features"),
         "feature epsilon on nopeek": ("nopeek", FEATURE_EPSILON,
                                       "it carries an epsilon_features that no defense of its settings (nopeek)"),
         "label epsilon on embedding-dp": ("embedding-dp", {"epsilon": 0.5, "epsilon_delta": 1e-5},
                                           "it carries an epsilon that no defense of its settings (embedding-dp)"),
         "epsilon without delta": ("embedding-dp", {"epsilon_features": 534.9},
                                   "its epsilon_features (534.9) and epsilon_features_delta (nan) are not a claim"),
         "delta without epsilon": ("embedding-dp", {"epsilon_delta": 1e-5},
                                   "its epsilon (nan) and epsilon_delta (1e-05) are not a claim"),
         "delta of 1": ("embedding-dp", {**FEATURE_EPSILON, "epsilon_features_delta": 1.0}, "are not a claim")}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_epsilon_its_defenses_cannot_claim_is_a_damaged_record(tmp_path, edit):
    defense, claims, why = EDITS[edit]
    kept = _record("embedding-dp", seed=1, **GENUINE)  # another seed: under its own key (review hunt3 P1)
    store = Store(tmp_path / "results.sqlite")
    store.put_many([_record(defense, **claims), kept])
    frame = load_results(tmp_path / "results.sqlite")
    assert list(frame["key"]) == [kept.key] and frame.attrs["damaged"][0][0] != kept.key
    assert why in frame.attrs["damaged"][0][1]


def test_a_resume_recomputes_a_record_whose_defense_cannot_claim_its_epsilon(tmp_path):
    store = Store(tmp_path / "results.sqlite")
    store.put(_record("nopeek", **FEATURE_EPSILON))
    notes = []
    drop_damaged(store, [_run("nopeek")], on_note=notes.append)
    assert store.get(_run("nopeek").key()) is None and "no defense of its settings (nopeek)" in notes[0]


@pytest.mark.parametrize("defense", ["embedding-dp", None])
def test_the_claims_a_run_writes_are_read(tmp_path, defense):
    Store(tmp_path / "results.sqlite").put(_record(defense, **(GENUINE if defense else {})))
    frame = load_results(tmp_path / "results.sqlite")
    assert len(frame) == 1 and frame.attrs["damaged"] == []
