"""Review leftovers: an empty audit list in a config refused as the CLI's empty option is, naming the valid choices
(``none`` among the defenses); an option and a ``--set`` that disagree; a feature attack's victim that is no party
index. Each refusal one ``error:`` line in planning, exit 2, nothing written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_helpers import one_error_line, refused_in_planning, wrote_nothing
from typer.testing import CliRunner

from vflpriv.cli import app
from vflpriv.workflows.audit_config import AuditConfig

AUDIT_REFUSED = [
    (["--set", "audit.defenses=[]"], "audit.defenses is empty; name defenses (none, alibi,"),
    (["--defenses", ""], "--defenses is empty; give names, comma-separated (none, alibi,"),
    (["--attacks", " , "], "--attacks is empty; give names, comma-separated (bli, direction,"),
    (["--phases", ""], "--phases is empty; give names, comma-separated (pretrain, finetune)"),
    (["--attacks", "mc,"], "--attacks 'mc,' names an empty item; give names, comma-separated (bli,"),  # lo3 F5
    (["--defenses", "iso, "], "--defenses 'iso, ' names an empty item; give names, comma-separated (none,"),
    (["--set", "audit.defenses=[{name: none, strengths: [1]}]"], "none (the undefended baseline) takes no settings"),
    (["--defenses", "none,none"], "audit.defenses repeat: none"),
    (["--set", "audit.feature_adversaries=active"],
     "audit.feature_adversaries is a list, not the single value 'active': write it in brackets"),
]


@pytest.mark.parametrize(("args", "needle"), AUDIT_REFUSED, ids=[" ".join(a)[:60] for a, _ in AUDIT_REFUSED])
def test_audit_refuses_in_planning(args, needle, tmp_path, monkeypatch):
    refused(["--quick", *args], needle, tmp_path, monkeypatch)


def refused(args, needle, tmp_path, monkeypatch):
    refused_in_planning(["audit", "--method", "splitnn", *args], needle, tmp_path, monkeypatch)


def test_none_in_a_config_is_the_cli_s_none_the_undefended_baseline_alone():
    one = AuditConfig.model_validate({"method": {"name": "splitnn"}, "audit": {"defenses": [{"name": "none"}]}})
    both = AuditConfig.model_validate({"audit": {"defenses": [{"name": "none"}, {"name": "iso"}]}})
    assert one.audit.defenses == [] and [d.name for d in both.audit.defenses] == ["iso"]


DISAGREE = [
    (["--quick", "--set", "audit.profile=full"], "--quick sets audit.profile=quick, but a --set makes it full"),
    (["--set", "audit.profile=full", "--quick"], "--quick sets audit.profile=quick, but a --set makes it full"),
    (["--quick", "--set", "audit={profile: full}"], "--quick sets audit.profile=quick, but a --set makes it full"),
    (["--quick", "--set", "audit={tune: true}"], "--quick sets audit.profile=quick, but a --set makes it unset"),
    (["--seeds", "0,1", "--set", "seeds=[2]"], "--seeds sets seeds=[0, 1], but a --set makes it [2]"),
    (["--defenses", "iso", "--set", "audit.defenses=[{name: mid}]"], "--defenses sets audit.defenses=[{name: iso}]"),
    # edited in place to other values (review lo2, F1): refused as a replacement is
    (["--seeds", "0,1", "--set", "seeds.0=5"], "--seeds sets seeds=[0, 1], but a --set makes it [5, 1]"),
    (["--defenses", "iso", "--set", "audit.defenses.0.name=mid"], "--defenses sets audit.defenses=[{name: iso}]"),
    (["--attacks", "mc", "--set", "audit.attacks.0=gc"], "--attacks sets audit.attacks=[mc], but a --set makes it [gc]"),
    (["--defenses", "iso,mid", "--set", "audit.defenses=[{name: mid}, {name: mid}]"],  # a set, with its repeats
     "--defenses sets audit.defenses=[{name: iso}, {name: mid}], but a --set makes it [{name: mid}, {name: mid}]"),
]


@pytest.mark.parametrize(("args", "needle"), DISAGREE, ids=[" ".join(a)[:60] for a, _ in DISAGREE])
def test_an_option_and_a_set_that_disagree_are_refused(args, needle, tmp_path, monkeypatch):
    refused(args, needle, tmp_path, monkeypatch)


def test_a_set_refining_what_an_option_set_is_kept():
    from vflpriv.cli.audit import build_audit

    common = {"config": None, "method": "splitnn", "dataset": None, "attacks": None, "phases": None, "seeds": None,
              "jobs": None, "backend": None, "device": None, "all_adversaries": False}
    cfg = build_audit(**common, defenses="iso", overrides=["audit.defenses.0.strengths=[1]", "audit.profile=quick"],
                      quick=True)
    assert cfg.audit.profile == "quick" and cfg.audit.defenses[0].strengths == [1]


def test_the_audit_s_attacks_and_defenses_reordered_by_a_set_are_kept_alike():
    """Review last2 R6: a reordered --attacks was kept and a reordered --defenses refused."""
    from vflpriv.cli.audit import build_audit

    common = {"config": None, "method": "splitnn", "dataset": None, "phases": None, "seeds": None, "jobs": None,
              "backend": None, "device": None, "all_adversaries": False, "quick": True}
    cfg = build_audit(**common, attacks="mc,gc", defenses="iso,mid",
                      overrides=["audit.attacks=[gc, mc]", "audit.defenses=[{name: mid}, {name: iso}]"])
    assert cfg.audit.attacks == ["gc", "mc"] and [d.name for d in cfg.audit.defenses] == ["mid", "iso"]


VICTIM = "is no victim; give a party index (0: the active party, 1 and up: the passive parties; the server holds no"
EVALUATE_REFUSED = [(["--set", f"attack.victim={value}"], f"{shown} {VICTIM}")
                    for value, shown in (("server", "'server'"), ("-1", "-1"), ("1.5", "1.5"), ("'²'", "'²'"),
                                         ("[1]", "[1]"), (".nan", "nan"))]
EVALUATE_REFUSED += [(["--set", "attack.search_space.lr=0.1", "--set", "attack.tune=true"],
                      "attack.search_space.lr is a list, not the single value 0.1")]  # review last, F4


@pytest.mark.parametrize(("args", "needle"), EVALUATE_REFUSED, ids=[" ".join(a)[:60] for a, _ in EVALUATE_REFUSED])
def test_evaluate_refuses_in_planning(args, needle, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with wrote_nothing(tmp_path, Path(os.environ["VFLPRIV_CACHE"])):
        result = CliRunner().invoke(app, ["evaluate", "--method", "splitnn", "--attack", "fi-decoder", *args,
                                          "--dry-run"])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, needle)


def test_tune_refuses_aux_features_without_advising_a_feature_attack_it_refuses_too(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with wrote_nothing(tmp_path, Path(os.environ["VFLPRIV_CACHE"])):
        result = CliRunner().invoke(app, ["tune", "--method", "splitnn", "--attack", "mc", "--defense", "iso",
                                          "--seeds", "0", "--set", "partition.aux_features=5", "--dry-run"])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, "partition.aux_features=5 is set, but only a feature attack reads it, and tune takes "
                                  "a label attack; remove it")


@pytest.mark.parametrize(("command", "args", "needle"), [
    ("evaluate", ["--attack", "mc", "--defense", "iso", "--set", "defenses.0.kinds=[]"],
     "invalid defenses[0]: kinds is empty; name the message kinds iso protects (embedding, gradient"),
    ("evaluate", ["--attack", "fi-decoder", "--defense", "nopeek", "--set", "defenses.0.kinds=[]"],
     "kinds is empty, and nopeek acts on no message; leave it out"),
    ("audit", ["--quick", "--defenses", "iso", "--set", "audit.defenses.0.kinds=[]"],
     "invalid audit.defenses[0]: kinds is empty; name the message kinds iso protects"),
], ids=["evaluate-iso", "evaluate-nopeek", "audit-iso"])
def test_empty_kinds_are_refused_not_read_as_the_defense_s_own(command, args, needle, tmp_path, monkeypatch):
    refused_in_planning([command, "--method", "splitnn", *args], needle, tmp_path, monkeypatch)


def test_canaries_no_attack_or_auditor_guesses_are_refused():
    """Beside feature attacks only they changed the labels trained with and were scored by nothing."""
    from vflpriv.common.errors import ConfigError
    from vflpriv.config.schema import RunConfig
    from vflpriv.tradeoff.sweep import check

    def run(attack: str, **finetune) -> RunConfig:
        return RunConfig.model_validate({"method": {"name": "splitnn"}, "attack": {"name": attack},
                                         "partition": {"canaries": 10}, "finetune": finetune})

    with pytest.raises(ConfigError, match=r"partition.canaries=10: no attack here guesses labels \(fi-decoder infers "
                                          r"features\) and no auditor does \(finetune.auditor\); add a label attack"):
        check([run("fi-decoder")])
    assert check([run("fi-decoder"), run("mc")]) == 1


@pytest.mark.parametrize("args", [["audit", "--quick", "--seeds", ""], ["audit", "--set", "seeds=[]"],
                                  ["evaluate", "--seeds", ""], ["evaluate", "--set", "seeds=[]"]])
def test_no_seed_is_refused_naming_what_to_give(args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with wrote_nothing(tmp_path, Path(os.environ["VFLPRIV_CACHE"])):
        result = CliRunner().invoke(app, [args[0], "--method", "splitnn", *args[1:], "--dry-run"])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, "invalid seeds: no seed given; give at least one (an integer 0 to 2147483647, e.g. "
                                  "0,1,2), or leave the seeds out for 0, 1, 2")


def test_label_dp_s_prior_temperature_that_overflows_the_logits_is_refused_in_planning(tmp_path, monkeypatch):
    """Review lo6 F2: temperature 1e-40 made the prior NaN and every second-stage label class 0, at rc 0, status
    ok."""
    refused_in_planning(["evaluate", "--dataset", "digits", "--defense", "label-dp", "--set",
                         "defenses.0.options.prior=two-stage", "--set", "defenses.0.options.temperature=1e-40"],
                        "temperature", tmp_path, monkeypatch)
