"""Task epsread (b): a feature epsilon is recorded only at a victim a feature-claiming defense of the run guards
(``claims.record_claims``); one carried at another party, or by a label attack's record, was tabled as a claim. Such
a record is damaged: left out of the tables with a warning, recomputed on resume."""

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

FEATURE_EPSILON = {"epsilon_features": 0.5, "epsilon_features_delta": 1e-5}


def _genuine(parties: int = 1) -> dict:
    """embedding-dp's feature claim at sigma 0.5 as a run writes it, with its entry: the worst row's 20 releases and
    20 DP-SGD steps (the default 20 epochs) at each of the ``parties`` it guards."""
    count = 40 * parties
    return {"epsilon_features": gaussian_epsilon(0.25, count, delta=1e-5), "epsilon_features_delta": 1e-5,
            "epsilon_accounting": json.dumps([{"defense": 0, "revision": EmbeddingDP.revision, "secret": "features",
                                               "count": count}])}


def _run(attack: dict, *, party: int | None = 1, seed: int = 0):
    """A three-party run under embedding-dp guarding ``party`` (None: every passive party)."""
    return ExperimentConfig.model_validate({
        "partition": {"parties": 3}, "attack": attack, "seeds": [seed], "strengths": [0.5],
        "defenses": [{"name": "embedding-dp", "sweep": True, "party": party}]}).runs()[0]


def _record(run, **claims):
    return replace(blank_record(run), num_classes=10, utility=0.8, status="n/a", **claims)


UNGUARDED = {"another victim": ({"name": "fi-decoder", "victim": 2}, 1, "at victim 2"),
             "a label attack": ({"name": "mc"}, None, "at victim none")}


@pytest.mark.parametrize("case", sorted(UNGUARDED))
def test_a_feature_epsilon_at_a_victim_its_defense_does_not_guard_is_damaged(tmp_path, case):
    attack, party, where = UNGUARDED[case]
    kept = _record(_run({"name": "fi-decoder", "victim": 1}, seed=1), **_genuine())  # under its own key (hunt3 P1)
    Store(tmp_path / "results.sqlite").put_many([_record(_run(attack, party=party), **FEATURE_EPSILON), kept])
    frame = load_results(tmp_path / "results.sqlite")
    assert list(frame["key"]) == [kept.key]
    assert f"epsilon_features {where}, whose features no defense of its settings claiming them (embedding-dp) " \
           "guards" in frame.attrs["damaged"][0][1]


def test_a_resume_recomputes_a_feature_epsilon_at_an_unguarded_victim(tmp_path):
    run = _run({"name": "fi-decoder", "victim": 2})
    store = Store(tmp_path / "results.sqlite")
    store.put(_record(run, **FEATURE_EPSILON))
    notes = []
    drop_damaged(store, [run], on_note=notes.append)
    assert store.get(run.key()) is None and "at victim 2" in notes[0]


@pytest.mark.parametrize("victim, party", [(1, 1), (2, None)])
def test_a_feature_epsilon_at_a_guarded_victim_is_read(tmp_path, victim, party):
    Store(tmp_path / "results.sqlite").put(_record(_run({"name": "fi-decoder", "victim": victim}, party=party),
                                                   **_genuine(1 if party else 2)))
    frame = load_results(tmp_path / "results.sqlite")
    assert len(frame) == 1 and frame.attrs["damaged"] == []


def test_a_read_builds_no_plugin_defense_of_its_own_accounting(tmp_path, monkeypatch):
    """Judging the victim (here, and where the epsilon is recomputed) builds the defense; a plugin's code (here its
    ``__init__``: its claim is its author's word, ``claims.foreign_accounting``) is not run where records are read,
    and its record is not judged."""
    from vflpriv.config.registry import DEFENSES
    from vflpriv.defenses.embedding_dp import EmbeddingDP

    built = []

    class Counted(EmbeddingDP):
        def __init__(self, **kwargs):
            built.append(kwargs["party"])
            super().__init__(**kwargs)

    monkeypatch.setitem(DEFENSES._extra, "counted-edp", Counted)
    run = ExperimentConfig.model_validate({
        "partition": {"parties": 3}, "attack": {"name": "fi-decoder", "victim": 2}, "seeds": [0], "strengths": [0.5],
        "defenses": [{"name": "counted-edp", "sweep": True, "party": 1}]}).runs()[0]
    counted = json.dumps([{"defense": 0, "revision": Counted.revision, "secret": "features", "count": 2}])
    Store(tmp_path / "results.sqlite").put(_record(run, **FEATURE_EPSILON, epsilon_accounting=counted))
    frame = load_results(tmp_path / "results.sqlite")
    assert built == [] and len(frame) == 1 and frame.attrs["damaged"] == []


def test_a_read_runs_no_plugin_code_of_a_label_claim(tmp_path, monkeypatch):
    """Review epsread F4: the recomputation of a label entry ran a plugin's ``Options`` validator, and an older
    record's check its ``claimed_epsilon``; the class is judged (``foreign_accounting``) before any of its code runs."""
    from pydantic import model_validator

    from vflpriv.config.registry import DEFENSES
    from vflpriv.defenses.dp_gaussian import GaussianDP
    from vflpriv.defenses.label_dp import LabelDP

    ran = []

    class Plug(GaussianDP):
        class Options(GaussianDP.Options):
            @model_validator(mode="after")
            def _seen(self):
                ran.append("Options validator")
                return self

    class PlugRR(LabelDP):
        @classmethod
        def claimed_epsilon(cls, *args, **kwargs):
            ran.append("claimed_epsilon")
            return 1.0, 0.0

    monkeypatch.setitem(DEFENSES._extra, "plug-dp", Plug)
    monkeypatch.setitem(DEFENSES._extra, "plug-rr", PlugRR)
    runs = [ExperimentConfig.model_validate({"attack": {"name": "mc"}, "seeds": [0], "strengths": [strength],
                                             "defenses": [{"name": name, "sweep": True}]}).runs()[0]
            for name, strength in (("plug-dp", 0.5), ("plug-rr", 2.0))]
    entry = [{"defense": 0, "revision": Plug.revision, "secret": "labels", "count": 1}]
    Store(tmp_path / "results.sqlite").put_many([
        _record(runs[0], epsilon=2.44, epsilon_delta=1e-5, epsilon_accounting=json.dumps(entry)),
        _record(runs[1], epsilon=1.0, epsilon_delta=0.0, epsilon_accounting=json.dumps([{**entry[0], "count": None}])),
        replace(_record(runs[1], epsilon=1.0, epsilon_delta=0.0, claim_version=5), key="k" * 20)])
    frame = load_results(tmp_path / "results.sqlite")
    assert ran == [] and frame.attrs["damaged"] == []
