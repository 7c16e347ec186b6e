"""An audit into a folder that holds another experiment's results is refused before its conformance trainings (they
cost minutes for a pretraining method), with nothing written; the same audit resumes there."""

from __future__ import annotations

import csv

import pytest
from typer.testing import CliRunner

import vflpriv.workflows.conformance as conformance
from vflpriv.cli import app

ARGS = ["audit", "--method", "splitnn", "--attacks", "gc", "--defenses", "none", "--seeds", "0,1"]


def test_another_experiment_s_folder_is_refused_before_any_training(tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    with (out / "results.csv").open("w", newline="") as f:
        csv.writer(f).writerows([["key", "method"], ["0123456789abcdef0123", "fedhssl"]])
    before = sorted(p.name for p in out.iterdir())
    monkeypatch.setattr(conformance, "check_conformance", lambda *a, **k: pytest.fail("trained before the refusal"))
    result = CliRunner().invoke(app, [*ARGS, "--out", str(out)])
    assert result.exit_code == 2
    assert result.output.startswith("error: --out") and "another experiment's results" in result.output
    assert sorted(p.name for p in out.iterdir()) == before
