"""Stop 18's leftovers: what a command prints of its own runs withholds the epsilon ``vflpriv table`` withholds; a
number spelt otherwise than plainly is refused on the command line, options and ``--set`` alike; a plugin's class
names and exception texts in errors are read without running its code, and bounded."""

from __future__ import annotations

import abc
import csv

import pytest
from cli_helpers import one_error_line, planned, refused_in_planning
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


class _Named(abc.ABCMeta):
    """A plugin's metaclass whose ``__name__`` is its code: an error text that reads it says 'Shown'."""

    @property
    def __name__(cls):
        return "Shown"


class _Raising(Exception, metaclass=_Named):
    def __str__(self):
        raise RuntimeError("the exception's __str__ ran")


class _Huge(Exception):
    def __str__(self):
        return "x" * (1 << 20)


@pytest.mark.parametrize("exc", [_Raising(), _Huge()], ids=["raising", "1 MB"])
def test_a_failed_training_s_error_reads_no_plugin_name_or_text_unbounded(exc, monkeypatch, tiny):
    """run_safely's record of a plugin's failure: ``type(exc).__name__`` ran the metaclass's code (the sweep died of
    its error), ``{exc}`` its ``__str__`` (a raising one too; a 1 MB one written into every record of the training)."""
    from vflpriv.runner import execution

    def failing(runs):
        raise exc

    monkeypatch.setattr(execution, "plan", failing)
    (record,) = execution.run_safely([tiny()])
    assert record.status == "failed" and record.error in ("_Raising: ?", "_Huge: " + "x" * execution.ERROR_WIDTH)


def test_a_claim_s_foreign_class_is_named_without_running_its_metaclass():
    """foreign_accounting named a mixed-in class by ``k.__name__``: its metaclass's property ran (and failed)."""
    from vflpriv.defenses.dp_gaussian import GaussianDP
    from vflpriv.runner.claims import foreign_accounting

    mixin = _Named("Mixin", (), {})
    plug = _Named("Plug", (mixin, GaussianDP), {})
    assert "Mixin (mixed in beside GaussianDP's accounting)" in foreign_accounting(plug, "plug")


@pytest.mark.parametrize(("body", "needle"), [
    ("class E(Exception):\n    def __str__(self):\n        return 'x' * (1 << 20)\nraise E()", "E: " + "x" * 300),
    ("class E(Exception):\n    def __str__(self):\n        raise RuntimeError('ran')\nraise E()", "E: ?"),
    ("import sys\nclass C:\n    def __str__(self):\n        return 'y' * (1 << 20)\nsys.exit(C())",
     "it called sys.exit(yyy"),
], ids=["1 MB", "raising", "exit 1 MB"])
def test_a_plugin_failing_at_import_is_one_bounded_error_line(body, needle, tmp_path, monkeypatch):
    """registry._loaded wrote ``{exc}``: a 1 MB line, or a traceback where its ``__str__`` raised."""
    (tmp_path / "hostileplugin.py").write_text(body + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = CliRunner().invoke(app, ["evaluate", "--method", "hostileplugin:Method", "--dry-run", "--out",
                                      str(tmp_path / "out")])
    assert result.exit_code == 2 and len(result.output) < 600, result.output[:300]
    one_error_line(result.output, f"cannot import method 'hostileplugin:Method': {needle}")
