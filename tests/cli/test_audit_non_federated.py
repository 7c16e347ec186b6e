"""The audit of a method that is not federated (``local-a``, ``centralized-*``: no message crosses parties) plans its
runs: it crashed with an IndexError (a feature attack there reads nothing, and the pairing read its first message
kind) since the feature attacks joined the default audit."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from vflpriv.cli import app


@pytest.mark.parametrize("method", ["local-a", "centralized-lr"])
def test_the_default_audit_of_a_method_that_is_not_federated_plans_without_a_traceback(method, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["audit", "--method", method, "--quick", "--dry-run"])
    assert result.exit_code == 0 and result.exception is None, result.output
    assert "to run (dry run: nothing trained, nothing written)" in result.output
    assert "not run: * x nopeek (finetune): defense 'nopeek' protects the embeddings a passive party sends" in result.output


def test_its_verdict_says_not_applicable_not_inconclusive(tmp_path):
    """Every run of it is not applicable (no adversary view): the verdict read 'inconclusive (leakage +nan on 0 seed; a
    paired test needs at least 2)', as if more seeds could tell; a feature attack's was dropped from the report, which
    read "no feature attack ran" and "Not applicable: - none" (review s10, finding 2). The console's count of pairs not
    applicable counted planning's only (nopeek's), not the three the runs found."""
    out = tmp_path / "audit"
    result = CliRunner().invoke(app, ["audit", "--method", "local-a", "--quick", "--attacks", "gc,fi-decoder",
                                      "--defenses", "none,iso,nopeek",
                                      "--set", "audit.attack_options.fi-decoder.epochs=1", "--set", "audit.prior=aux",
                                      "--set", "audit.prior_epochs=5", "--set", "method.options.supervised_epochs=1",
                                      "--out", str(out), "--jobs", "1"])
    assert result.exit_code == 0, result.output
    assert "gc (finetune): not applicable: method 'local-a' is not federated" in result.output
    assert "| 1 | gc | finetune | iso | λ=5 |" in (out / "audit.md").read_text()  # its defended row: not "not within"
    assert "n/a: the attack does not apply (see Not applicable) |" in (out / "audit.md").read_text()
    report = (out / "audit.md").read_text()
    assert "- labels (finetune), adversary party 1: n/a (gc" in report
    assert "- party 1's features (finetune): n/a (fi-decoder by party 0 (the active party)" in report
    assert "fi-decoder by the server on party 1's features (finetune): not applicable: method 'local-a' is not" in report
    assert "no feature attack ran" not in report
    not_applicable = report.split("## Not applicable")[1]
    for attack in ("gc", "fi-decoder"):
        assert f"- {attack} x none (finetune): method 'local-a' is not federated" in not_applicable
    listed = [line for line in not_applicable.split("\n## ")[0].splitlines() if line.startswith("- ")]
    assert len(listed) == 4 and "- * x nopeek (finetune): defense 'nopeek' protects" in not_applicable  # planning's
    assert f"4 pair(s) not applicable, listed with the reason in {out / 'audit.md'}" in " ".join(result.output.split())


def test_evaluate_says_on_the_console_that_its_attack_is_not_applicable(tmp_path):
    """`evaluate` of a method that is not federated trained, recorded n/a and exited 0 without a word of it on the
    console where no defense is swept (review s10, finding 8). Its runs still record the utility (and a label
    attack's the prior: the local baseline a table compares with), so it runs and says so rather than being refused."""
    result = CliRunner().invoke(app, ["evaluate", "--method", "local-a", "--attack", "fi-decoder", "--defense", "none",
                                      "--seeds", "0", "--set", "attack.options.epochs=1", "--set",
                                      "method.options.supervised_epochs=1", "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert ("not applicable: fi-decoder (finetune), 1 run: method 'local-a' is not federated: no message crosses "
            "parties, so there is no adversary view to attack; its records hold the utility only") in " ".join(
        result.output.split())
