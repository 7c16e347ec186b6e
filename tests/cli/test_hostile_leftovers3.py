"""Stop 18's leftovers: what a command prints of its own runs withholds the epsilon ``vflpriv table`` withholds; a
number spelt otherwise than plainly is refused on the command line, options and ``--set`` alike."""

from __future__ import annotations

import csv

import pytest
from cli_helpers import planned, refused_in_planning
from typer.testing import CliRunner

from vflpriv.cli import app
from vflpriv.config.registry import METHODS
from vflpriv.methods.splitnn import SplitNN

TINY = ["--set", "partition.labeled=60", "--set", "partition.aux=20", "--set", "model.hidden=32", "--set",
        "model.out_dim=16", "--set", "finetune.epochs=1", "--set", "attack.prior=none", "--set",
        "attack.options.epochs=2"]


def test_evaluate_prints_and_writes_no_epsilon_that_table_withholds(tmp_path):
    """A plugin method beside dp-gaussian: ``vflpriv table`` withholds the epsilon (its count is the plugin's code),
    evaluate's own table printed it ('25.9 at δ 1e-05') and results.csv held it (``test_unjudged_epsilons``: the
    table's)."""
    METHODS.register("plug-method", type("Plug", (SplitNN,), {}))
    args = ["evaluate", "--method", "plug-method", "--defense", "dp-gaussian", "--strengths", "0.5", "--seeds", "0",
            "--out", str(tmp_path), "--quiet", *TINY]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "at δ" not in result.output and "ε spent" not in result.output, result.output
    assert "warning: 1 record(s) shown without their epsilon" in result.output
    with (tmp_path / "results.csv").open(newline="", encoding="utf-8") as f:
        (row,) = list(csv.DictReader(f))
    assert row["epsilon"] in ("", "nan") and "epsilon withheld: method plug-method" in row["notes"]


#: A number spelt as int(), float(), pydantic or YAML 1.1 read it but ``--seeds`` refuses or reads otherwise (review
#: misc F10): each read as another number before (``1_000`` as 1000, ``017`` as 15, ``1:40`` as 100).
UNPLAIN = [
    (["evaluate", "--jobs", "1_0"], "--jobs expects an integer, got '1_0' (ASCII digits, no '_': e.g. 2)"),
    (["evaluate", "--canaries", "\u0663"], "--canaries expects an integer, got '\\u0663' (ASCII digits, no '_'"),
    (["tune", "--defense", "iso", "--low", "1_0.5"], "--low expects a number, got '1_0.5' (ASCII digits, no '_'"),
    (["tune", "--defense", "iso", "--steps", "1_0"], "--steps expects an integer, got '1_0'"),
    (["audit", "--quick", "--jobs=1_0"], "--jobs expects an integer, got '1_0'"),
    (["evaluate", "--set", "seeds=[1_000]"], "--set seeds=[1_000]: 1_000 is no plain number; write ASCII decimal"),
    (["evaluate", "--set", "jobs='1_0'"], "--set jobs='1_0': 1_0 is no plain number"),
    (["evaluate", "--set", "seeds=[017]"], "--set seeds=[017]: 017 is no plain number"),
    (["evaluate", "--set", "partition.labeled=1:40"], "--set partition.labeled=1:40: 1:40 is no plain number"),
    (["evaluate", "--set", "strengths=['1_0.5']"], "--set strengths=['1_0.5']: 1_0.5 is no plain number"),
]


@pytest.mark.parametrize(("args", "needle"), UNPLAIN, ids=[" ".join(a)[:40] for a, _ in UNPLAIN])
def test_a_number_not_spelt_plainly_is_refused_in_planning(args, needle, tmp_path, monkeypatch):
    refused_in_planning(args, needle, tmp_path, monkeypatch)


def test_plain_numbers_and_texts_still_read(tmp_path, monkeypatch):
    """Decimal numbers, an exponent (a text YAML 1.1 leaves to pydantic) and names with '_' are no refusal."""
    result = planned(["evaluate", "--jobs", "1", "--seeds", "0,10", "--set", "finetune.lr=1e-3", "--set",
                      "partition.labeled=+100", "--set", "defenses=[{name: iso, strength: .5}]"], tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
