"""``evaluate`` with several attacks sets aside those the method or task does not allow, with the reason (as the
audit does), and refuses only when none applies; an attack named alone is refused as before."""

from __future__ import annotations

import pandas as pd
from cli_helpers import one_error_line, wrote_nothing
from typer.testing import CliRunner

from vflpriv.cli import app

FAST = ["--method", "splitnn", "--seeds", "0", "--strengths", "1", "--set", "finetune.epochs=2", "--quiet"]


def test_an_inapplicable_attack_among_several_is_set_aside_with_its_reason(tmp_path):
    result = CliRunner().invoke(app, ["evaluate", *FAST, "--attack", "mc,dli,gc", "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert "set aside: attack dli: the sign rule reads one gradient entry per class" in result.output
    runs = pd.read_csv(tmp_path / "o" / "results.csv")
    assert sorted(runs["attack"]) == ["gc", "mc"] and (runs["status"] == "ok").all()


def test_the_runs_kept_are_the_runs_the_applicable_attacks_alone_would_make(tmp_path):
    from vflpriv.config.sweep import ExperimentConfig
    from vflpriv.workflows.triage import applicable_attacks

    both = ExperimentConfig.model_validate({"method": {"name": "splitnn"}, "attack": {"name": ["mc", "dli"]},
                                            "seeds": [0, 1]})
    alone = ExperimentConfig.model_validate({"method": {"name": "splitnn"}, "attack": {"name": "mc"},
                                             "seeds": [0, 1]})
    kept, set_aside = applicable_attacks(both.runs())
    assert [r.key() for r in kept] == [r.key() for r in alone.runs()] and [n for n, _ in set_aside] == ["dli"]


def test_when_no_attack_applies_the_command_is_refused_and_writes_nothing(tmp_path, monkeypatch):
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    with wrote_nothing(tmp_path):
        result = CliRunner().invoke(app, ["evaluate", *FAST, "--attack", "dli,direction", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, "no attack applies: dli: the sign rule")
    assert "direction: attack 'direction' needs a binary task" in result.output


def test_an_inapplicable_attack_named_alone_is_refused(tmp_path):
    result = CliRunner().invoke(app, ["evaluate", *FAST, "--attack", "dli", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    one_error_line(result.output, "attack 'dli': the sign rule reads one gradient entry per class")


def test_a_note_that_an_attack_was_not_tuned_names_the_attack(tmp_path):
    result = CliRunner().invoke(app, ["evaluate", *FAST, "--attack", "mc,gc", "--tune-attacks", "--set",
                                      "partition.aux=10", "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    for name in ("mc", "gc"):
        assert f"note: attack {name} not tuned: too few auxiliary labels to hold any out" in result.output
