"""Review hunt3 P12: a resume judged stored records by ``spelling.disagreement`` only, so a plugin method's void claim
edited into an epsilon (withheld by every read) was resumed as done, printed by evaluate and tested by the audit's
canary verdict. Where the plugin is importable, the resume judges its settings' void with the method and recomputes."""

from __future__ import annotations

import csv
import json
import math
import sqlite3

import pytest
from typer.testing import CliRunner

from vflpriv.cli import app
from vflpriv.defenses.dp_gaussian import spent
from vflpriv.store.sqlite import read_store

TINY = ["--set", "partition.labeled=60", "--set", "partition.aux=20", "--set", "model.hidden=32", "--set",
        "model.out_dim=16", "--set", "finetune.epochs=1"]
USE = "LeakySplit reads the raw labels in a step of its own"


PLUGIN = f'''
from vflpriv.methods.splitnn import SplitNN


class LeakySplit(SplitNN):
    def label_uses(self):
        return ["{USE}"]
'''
METHOD = "p12_leaky_plugin:LeakySplit"


@pytest.fixture(autouse=True)
def leaky(tmp_path, monkeypatch):
    """A plugin splitnn declaring a label use outside dp-gaussian's loop (its claim void), as the review's; importable
    by the audit's worker processes too."""
    (tmp_path / "plug").mkdir()
    (tmp_path / "plug" / "p12_leaky_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path / "plug"))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "plug"))


def _unvoided(store) -> int:
    """The review's edit: each void dp-gaussian entry made a claim, with the epsilon its settings' count gives."""
    done = 0
    with sqlite3.connect(store) as db:
        for key, text in db.execute("SELECT key, record FROM runs").fetchall():
            record = json.loads(text)
            entries = json.loads(record["epsilon_accounting"] or "[]")
            if entries and entries[0].pop("void", False):
                record.update(epsilon=spent(record["strength"], delta=1e-5, uses=entries[0]["count"]),
                              epsilon_delta=1e-5, epsilon_accounting=json.dumps(entries))
                db.execute("UPDATE runs SET record = ? WHERE key = ?", (json.dumps(record), key))
                done += 1
    return done


def _twice(args: list[str], store) -> str:
    """The command's output resumed on its own store after the un-void edit (one entry edited)."""
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    assert _unvoided(store) == 1
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    return " ".join(again.output.split())


def _voided(store) -> None:
    """Every dp-gaussian record of ``store`` holds its void entry again and no epsilon."""
    claims = [r for r in read_store(store).records if r.defense == "dp-gaussian" and r.strength]
    assert claims and all(json.loads(r.epsilon_accounting)[0].get("void") is True and math.isnan(r.epsilon)
                          for r in claims)


def test_evaluate_recomputes_an_unvoided_plugin_claim_and_shows_no_epsilon(tmp_path):
    args = ["evaluate", "--method", METHOD, "--defense", "dp-gaussian", "--strengths", "2", "--seeds", "0",
            "--set", "attack.prior=none", "--set", "attack.options.epochs=2", "--out", str(tmp_path / "out"), "--quiet",
            *TINY]
    output = _twice(args, tmp_path / "out" / "results.sqlite")
    assert "0 already in the store, 1 to run" in output, output
    assert "damaged record(s) in the store deleted and recomputed" in output and USE in output
    assert "at δ" not in output
    _voided(tmp_path / "out" / "results.sqlite")
    (row,) = csv.DictReader(open(tmp_path / "out" / "results.csv"))
    assert row["epsilon"] == ""


def test_audit_recomputes_an_unvoided_plugin_claim_and_tests_no_epsilon(tmp_path):
    args = ["audit", "--method", METHOD, "--quick", "--attacks", "mc", "--defenses", "dp-gaussian",
            "--out", str(tmp_path / "out"), "--quiet", *TINY]
    output = _twice(args, tmp_path / "out" / "results.sqlite")
    assert "1 to run" in output and "damaged record(s) in the store deleted and recomputed" in output, output
    _voided(tmp_path / "out" / "results.sqlite")
    report = (tmp_path / "out" / "audit.md").read_text()
    assert "claimed epsilon" in report and "not rejected" not in report and "rejected (" not in report
