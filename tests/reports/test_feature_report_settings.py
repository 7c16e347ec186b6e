"""A report reads every setting of a store: feature runs of two configurations (or methods) on the same seed are two
verdicts, each named, never one leakage test's repeated seed (it stopped with a traceback)."""

from __future__ import annotations

import dataclasses
import json

from typer.testing import CliRunner

from vflpriv.cli import app
from vflpriv.config.schema import RunConfig
from vflpriv.runner.execution import run
from vflpriv.store.sqlite import Store


def test_a_report_of_feature_runs_of_two_configurations_names_a_verdict_for_each(tiny, tmp_path):
    (record,) = run(tiny(attack={"name": "fi-decoder", "options": {"epochs": 1}, "prior": "none"},
                         finetune={"epochs": 1}, partition={"labeled": 60, "aux": 20}))
    assert record.status == "ok", record.error
    config = json.loads(record.config)
    config["partition"]["aux_features"] = 5  # another configuration of the same attack, seed and method
    other = dataclasses.replace(record, key=RunConfig.model_validate(config).key(),  # its own (review hunt3 P1)
                                config=json.dumps(config, sort_keys=True))
    with Store(tmp_path / "results.sqlite") as store:
        store.put_many([record, other])
    result = CliRunner().invoke(app, ["report", str(tmp_path), "--out", str(tmp_path / "report")])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "report" / "report.html").read_text()
    for aux in ("unset", "5"):
        assert f"splitnn on digits (partition.aux_features={aux}): fi-decoder by party 0" in page
