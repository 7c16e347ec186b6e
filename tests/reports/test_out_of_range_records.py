"""Review hunt H7: a record's seed below 0, NaN or negative strength, or 0 classes were read and reported as failed
runs ("strengths nan failed", "seeds -7 left out"). Such a record is damaged by the settings' own rules (a seed 0 to
2**31 - 1, a strength >= 0, 2 classes or more): left out with the damaged-record warning, whatever its settings say."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from vflpriv.config.sweep import ExperimentConfig
from vflpriv.reports.results import load_results
from vflpriv.runner.execution import blank_record
from vflpriv.store.records import RunRecord, stored
from vflpriv.store.sqlite import Store

EDITS = {"seed -7": ({"seed": -7}, "its seed -7 is outside 0..2147483647"),
         "seed 2**31": ({"seed": 2**31}, "its seed 2147483648 is outside"),
         "strength -1": ({"strength": -1.0}, "its strength (-1) is not a number >= 0"),
         "strength NaN": ({"strength": None}, "its strength (nan) is not a number >= 0"),
         "0 classes": ({"num_classes": 0}, "its num_classes is 0; a run's data has 2 or more"),
         "1 class": ({"num_classes": 1}, "its num_classes is 1")}


def _record(status: str = "ok", num_classes: int = 10, seed: int = 0) -> RunRecord:
    run = ExperimentConfig.model_validate({"attack": {"name": "mc"}, "strengths": [1.0], "seeds": [seed]}).runs()[0]
    return replace(blank_record(run), num_classes=num_classes, status=status, utility=0.8)


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_out_of_range_field_is_a_damaged_record_even_where_its_settings_say_the_same(edit):
    fields, why = EDITS[edit]
    data = json.loads(_record().to_json()) | fields
    data["config"] = json.dumps(json.loads(data["config"]) | {k: v for k, v in fields.items() if k == "seed"})
    record, problem = stored(data["key"], json.dumps(data))
    assert record is None and why in problem


def test_the_tables_leave_it_out_with_the_damaged_record_warning(tmp_path):
    kept = _record(seed=1)  # another seed: under its own key (review hunt3 P1)
    Store(tmp_path / "results.sqlite").put_many([replace(_record(), seed=-7), kept])
    frame = load_results(tmp_path / "results.sqlite")
    assert list(frame["key"]) == [kept.key] and "its seed -7 is outside" in frame.attrs["damaged"][0][1]


def test_a_run_that_failed_before_its_data_loaded_reads_with_0_classes():
    record = _record(status="failed", num_classes=0)
    found, problem = stored(record.key, record.to_json())
    assert problem == "" and found.num_classes == 0
