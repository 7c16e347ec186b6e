"""An auditor the user names is one the audit runs, or one ``error:`` line in planning says why not (it plants no
canaries, or audits none of the audit's defenses), exit 2, nothing written; ``evaluate`` refused the same already."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_helpers import one_error_line, wrote_nothing
from typer.testing import CliRunner

from vflpriv.cli import app

REFUSED = [
    (["--defenses", "dp-gaussian", "--set", "audit.auditor=gradient-lrt", "--canaries", "0"],
     "audit.auditor=gradient-lrt needs the random-label canaries, but this audit plants none"),
    (["--defenses", "dp-gaussian", "--set", "audit.auditor_options.canary_inputs=crafted", "--canaries", "0"],
     "audit.auditor_options needs the random-label canaries, but this audit plants none"),
    (["--defenses", "iso", "--set", "audit.auditor=gradient-lrt"],
     "audit.auditor=gradient-lrt audits none of this audit's defenses (iso); it audits: dp-gaussian"),
    (["--defenses", "nopeek", "--canaries", "20", "--set", "audit.auditor_options.canary_inputs=crafted"],
     "audit.auditor_options is set, but no auditor audits any of this audit's defenses (nopeek)"),
]


@pytest.mark.parametrize(("args", "needle"), REFUSED, ids=[" ".join(a)[:70] for a, _ in REFUSED])
def test_a_named_auditor_the_audit_would_drop_is_refused_in_planning(args, needle, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with wrote_nothing(tmp_path, Path(os.environ["VFLPRIV_CACHE"])):
        result = CliRunner().invoke(app, ["audit", "--method", "splitnn", "--quick", "--attacks", "mc", *args,
                                          "--dry-run"])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, needle)


def test_the_default_auditor_without_canaries_is_no_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["audit", "--method", "splitnn", "--quick", "--attacks", "mc", "--defenses",
                                      "dp-gaussian,iso", "--canaries", "0", "--dry-run"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(("setting", "needle"), [
    ("audit.attack_options.fi-decoder.epochs=0", "invalid audit.attack_options.fi-decoder.epochs=0: "),
    ("audit.attack_options.grn.observe=foo", "invalid audit.attack_options.grn.observe='foo': "),
    ("audit.search_spaces.mc.bogus=[1]", "audit.search_spaces.mc names bogus, not an option of attack 'mc'"),
    ("audit.search_spaces.mc.epochs=[]", "audit.search_spaces.mc.epochs is empty"),
    ("audit.search_spaces.mc.epochs=[0]", "invalid audit.search_spaces.mc.epochs=0: "),
])
def test_a_bad_attack_option_of_the_audit_is_named_as_the_user_gave_it(setting, needle, tmp_path, monkeypatch):
    """It read ``invalid attack.options.epochs=0``: a key the audit file does not have."""
    monkeypatch.chdir(tmp_path)
    with wrote_nothing(tmp_path, Path(os.environ["VFLPRIV_CACHE"])):
        result = CliRunner().invoke(app, ["audit", "--method", "splitnn", "--quick", "--attacks", "fi-decoder,grn,mc",
                                          "--tune-attacks", "--set", setting, "--dry-run"])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, needle)


@pytest.mark.parametrize("setting", ["audit.attack_options.mc.epochs=5", "audit.search_spaces.mc.epochs=[5]"])
def test_a_setting_for_an_attack_the_quick_audit_does_not_run_is_refused_not_ignored(setting, tmp_path, monkeypatch):
    """--quick runs the strongest attack of each kind; mc's settings were accepted and silently unused."""
    monkeypatch.chdir(tmp_path)
    with wrote_nothing(tmp_path, Path(os.environ["VFLPRIV_CACHE"])):
        result = CliRunner().invoke(app, ["audit", "--method", "splitnn", "--quick", "--tune-attacks", "--set", setting,
                                          "--dry-run"])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, "names mc, not an attack of this audit; its attacks: fi-decoder, gc, mc-mixmatch")
