"""Review hunt H5: a record whose own fields (method, defense, strength, seed, roles, ...) say another run than its
settings was read as that run: a dp-gaussian sigma 1 record edited to ``defense=none`` was an undefended row carrying
an epsilon, and a resume reused it. Such a record is damaged: left out of the tables with a warning, recomputed on
resume (the fields compared are the ones ``blank_record`` derives from the settings)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from vflpriv.config.sweep import ExperimentConfig
from vflpriv.reports.results import load_results
from vflpriv.runner.execution import blank_record
from vflpriv.defenses.dp_gaussian import GaussianDP, spent
from vflpriv.store.sqlite import Store
from vflpriv.tradeoff.sweep import drop_damaged


def _runs():
    return ExperimentConfig.model_validate({"attack": {"name": "mc"}, "strengths": [1.0], "seeds": [0, 1],
                                            "defenses": [{"name": "dp-gaussian", "sweep": True}]}).runs()


def _record(run):
    """A scored record as the runner writes it (its naming fields from ``blank_record``)."""
    return replace(blank_record(run), num_classes=10, utility=0.8, attack_accuracy=0.4, prior_accuracy=0.1,
                   leakage=0.3, strength_axis="sigma", epsilon=spent(1.0, delta=1e-5, uses=20), epsilon_delta=1e-5,
                   n_targets=4, epsilon_accounting=json.dumps([{"defense": 0, "revision": GaussianDP.revision,
                                                                "secret": "labels", "count": 20}]))


#: Each edit of a naming field (the undefended one without its epsilon, which alone is damage: H6).
UNDEFENDED = {"defense": "none", "strength": 0.0, "epsilon": float("nan"), "epsilon_delta": float("nan")}
EDITS = {"defense": UNDEFENDED, "method": {"method": "no-such-method"},
         "strength": {"strength": 99.0}, "seed": {"seed": 1}, "adversary": {"adversary": "server"},
         "dataset": {"dataset": "breast-cancer"}}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_record_naming_another_run_than_its_settings_is_left_out_of_the_tables(tmp_path, edit):
    first, second = _runs()
    store = Store(tmp_path / "results.sqlite")
    store.put_many([replace(_record(first), **EDITS[edit]), _record(second)])
    frame = load_results(tmp_path / "results.sqlite")
    assert list(frame["key"]) == [second.key()]
    assert [k for k, _ in frame.attrs["damaged"]] == [first.key()]
    assert f"its {edit} is" in frame.attrs["damaged"][0][1]


def test_a_resume_recomputes_a_record_naming_another_run_and_keeps_the_rest(tmp_path):
    first, second = _runs()
    store = Store(tmp_path / "results.sqlite")
    store.put_many([replace(_record(first), **UNDEFENDED), _record(second)])
    notes = []
    drop_damaged(store, [first, second], on_note=notes.append)
    assert store.get(first.key()) is None and store.get(second.key()) is not None
    assert "its defense is 'none', where its settings say 'dp-gaussian'" in notes[0]


def test_records_as_written_are_all_read(tmp_path):
    store = Store(tmp_path / "results.sqlite")
    store.put_many([_record(run) for run in _runs()])
    frame = load_results(tmp_path / "results.sqlite")
    assert len(frame) == 2 and frame.attrs["damaged"] == []
