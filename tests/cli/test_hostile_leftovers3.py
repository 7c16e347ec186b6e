"""Stop 18's leftovers: what a command prints of its own runs withholds the epsilon ``vflpriv table`` withholds."""

from __future__ import annotations

import csv

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
