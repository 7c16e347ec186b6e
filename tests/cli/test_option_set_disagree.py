"""``evaluate`` and ``tune`` refuse an option and a ``--set`` that disagree, with the audit's shared check; a
``--set`` refining what an option set is kept; an empty name in ``--attack``, and tune's bounds that are no finite
strengths, are refused by the option's own name. Each refusal one ``error:`` line in planning, exit 2."""

from __future__ import annotations

import pytest
from cli_helpers import one_error_line, refused_in_planning
from typer.testing import CliRunner

from vflpriv.cli import app
from vflpriv.cli.evaluate import build_experiment
from vflpriv.config.sweep import ExperimentConfig

DISAGREE = [
    (["--seeds", "0,1", "--set", "seeds.0=5"], "--seeds sets seeds=[0, 1], but a --set makes it [5, 1]"),
    (["--attack", "mc", "--set", "attack.name=gc"], "--attack sets attack.name=mc, but a --set makes it gc"),
    (["--attack", "mc,gc", "--set", "attack={name: norm}"], "--attack sets attack.name=[mc, gc], but a --set makes it"
                                                            " norm"),
    (["--defense", "iso", "--set", "defenses.0.name=mid"], "--defense sets defenses=[{name: iso, phase: finetune, "
                                                           "sweep: true}], but a --set makes it [{name: mid,"),
    (["--method", "splitnn", "--set", "method.name=local-a"], "--method sets method.name=splitnn, but a --set makes"),
    (["--phase", "finetune", "--set", "attack.phase=pretrain"], "--phase sets attack.phase=finetune, but a --set"),
    (["--strengths", "1,2", "--set", "strengths=[3]"], "--strengths sets strengths=[1.0, 2.0], but a --set makes it"),
    (["--no-tune-attacks", "--set", "attack.tune=true"], "--tune-attacks/--no-tune-attacks sets attack.tune=false"),
    # review lo3 F1: --defense also says the defense is swept, and --phase where it acts
    (["--defense", "iso", "--set", "defenses.0.sweep=false"], "--defense sets defenses=[{name: iso, phase: finetune, "
                                                              "sweep: true}], but a --set makes it [{name: iso,"),
    (["--defense", "iso", "--set", 'defenses.0.sweep="false"'], "--defense sets defenses=[{name: iso, phase: "
                                                                "finetune, sweep: true}], but a --set makes it"),
    (["--method", "fedhssl", "--phase", "pretrain", "--defense", "iso", "--set", "defenses.0.phase=finetune"],
     "--defense sets defenses=[{name: iso, phase: pretrain, sweep: true}], but a --set makes it"),
    # review last2 R4: a section without a phase acts in the default one, finetune, not in --phase's
    (["--method", "fedhssl", "--phase", "pretrain", "--defense", "iso", "--set", "defenses=[{name: iso, sweep: true}]"],
     "--defense sets defenses=[{name: iso, phase: pretrain, sweep: true}], but a --set makes it"),
]


CASES = [("evaluate", a, n) for a, n in DISAGREE] + [("tune", a, n) for a, n in DISAGREE[:2] + DISAGREE[4:6]
                                                     + DISAGREE[-3:]]  # tune builds through evaluate (last2 R7)
#: Review lo3 F4: what says the same (the same attacks reordered, a list of one), a fixed defense added
#: beside the swept one, the swept one's phase where --phase did not give it: kept.
AGREE = [(["--attack", "mc", "--set", "attack.name=[mc]"], ["mc"]),  # review last2 R1: a list of one is the attack
         (["--attack", "mc,gc", "--set", "attack.name=[gc, mc]"], ["gc", "mc"]),
         (["--defense", "none", "--set", "defenses=[{name: iso, strength: 1}]"], [("iso", False)]),
         (["--defense", "iso", "--set", "defenses.0.phase=pretrain", "--method", "fedhssl"], [("iso", True)]),
         # review last2 R4: the phase the section resolves to (the default, finetune) is the one --phase gives
         (["--phase", "finetune", "--defense", "iso", "--set", "defenses=[{name: iso, sweep: true}]"], [("iso", True)]),
         # review l4 F2: sweep written as a string validation reads as true says what --defense says
         (["--defense", "iso", "--set", 'defenses.0.sweep="yes"'], [("iso", True)])]


@pytest.mark.parametrize(("command", "args", "needle"), CASES, ids=[f"{c} {' '.join(a)}"[:60] for c, a, _ in CASES])
def test_an_option_and_a_set_that_disagree_are_refused(command, args, needle, tmp_path, monkeypatch):
    output = refused_in_planning([command, "--dataset", "digits", *args], needle, tmp_path, monkeypatch)
    assert "; give one of them" in output


def test_a_set_refining_what_an_option_set_is_kept():
    options = {"config": None, "method": "splitnn", "dataset": None, "strengths": "1,5", "phase": None,
               "jobs": None, "backend": None, "device": None}
    exp = build_experiment(**options, attack="mc", defense="iso", seeds="0,1",
                           overrides=["defenses.0.kinds=[embedding]", "attack.tune=true", "seeds=[0, 1]"])
    assert exp.defenses[0].name == "iso" and exp.defenses[0].kinds == ["embedding"]
    assert exp.attack.tune and exp.seeds == [0, 1] and exp.strengths == [1.0, 5.0]


@pytest.mark.parametrize(("args", "found"), AGREE, ids=[" ".join(a)[:50] for a, _ in AGREE])
def test_a_set_that_says_the_same_or_adds_beside_the_option_is_kept(args, found, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["evaluate", "--dataset", "digits", "--seeds", "0", *args, "--dry-run"])
    assert result.exit_code == 0, result.output
    options = dict(zip(args[::2], args[1::2]))
    exp = build_experiment(config=None, method=options.get("--method"), dataset="digits", strengths=None,
                           phase=options.get("--phase"), jobs=None, backend=None, device=None,
                           attack=options.get("--attack"),
                           defense=options.get("--defense"), seeds="0", overrides=[options["--set"]])
    attacks = [exp.attack.name] if isinstance(exp.attack.name, str) else list(exp.attack.name)
    assert (attacks if isinstance(found[0], str) else [(d.name, d.sweep) for d in exp.defenses]) == found


@pytest.mark.parametrize("flag", ['"false"', '"no"', '"0"'])
def test_a_defense_a_file_leaves_unswept_in_words_stays_beside_the_one_defense_sweeps(flag, tmp_path):
    """Review l4 F1: ``sweep: "false"`` was read as swept by its truthiness, so ``--defense iso`` dropped the file's
    fixed mid with nothing said, and without ``--defense`` its strength read as a sweep's; read as validation reads
    it."""
    config = tmp_path / "c.yaml"
    config.write_text(f"defenses: [{{name: mid, strength: 1, sweep: {flag}}}]\n")
    options = {"method": None, "dataset": "digits", "strengths": None, "phase": None, "jobs": None, "backend": None,
               "device": None, "attack": None, "seeds": "0", "overrides": []}
    exp = build_experiment(config=str(config), defense="iso", **options)
    assert [(d.name, d.sweep, d.strength) for d in exp.defenses] == [("mid", False, 1.0), ("iso", True, None)]
    alone = build_experiment(config=str(config), defense=None, **options)
    assert [(d.name, d.sweep) for d in alone.defenses] == [("mid", False)]


def test_a_bare_value_for_an_option_s_list_gets_the_list_hint_not_a_disagreement(tmp_path, monkeypatch):
    """Review lo3 F4: ``--seeds 0 --set seeds=0`` read as a disagreement; it is the same seed, written without
    brackets."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["evaluate", "--seeds", "0", "--set", "seeds=0", "--dry-run"])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, "seeds is a list, not the single value 0: write it in brackets")


@pytest.mark.parametrize("names", ["", " , ", "mc,", ",gc"])
def test_an_empty_attack_name_is_refused_naming_the_valid_ones(names, tmp_path, monkeypatch):
    """``--attack ' , '`` was refused as "attack names repeat: , " and ``--attack mc,`` as "unknown attack ''"."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["evaluate", "--attack", names, "--dry-run"])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, f"--attack '{names}' names an empty attack; give attack names, comma-separated (bli,")


@pytest.mark.parametrize(("bound", "needle"), [(["--high", "inf"], "low=0.01, high=inf"),
                                               (["--low", "nan"], "low=nan, high=")])
def test_tune_refuses_a_bound_that_is_no_finite_strength_naming_its_option(bound, needle, tmp_path, monkeypatch):
    """``--high inf`` was refused as "invalid strengths[0]=inf" (a setting the user never typed)."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["tune", "--attack", "mc", "--defense", "iso", "--seeds", "0", *bound,
                                      "--dry-run"])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, f"--low/--high must be finite strengths, got {needle}")


MOVED = ("--defense iso sweeps it in finetune, the attacked phase before the --set, but a --set makes the attacked "
         "phase ")


@pytest.mark.parametrize("command", ["evaluate", "tune"])
@pytest.mark.parametrize("moved", ["attack.phase=pretrain", "attack={phase: pretrain}"])
def test_a_set_moving_the_attack_away_from_the_phase_defense_swept_in_is_refused(command, moved, tmp_path,
                                                                                 monkeypatch):
    """Review last2's aside: --defense sweeps in the attacked phase, read before the --sets; a --set moving the
    attack to pretrain left the defense in finetune, after what the attack reads, where it measures nothing."""
    refused_in_planning([command, "--method", "fedhssl", "--defense", "iso", "--set", moved], MOVED + "pretrain; "
                        "give --phase pretrain to attack and defend pretrain", tmp_path, monkeypatch)


def test_a_set_moving_the_attack_and_the_swept_defense_alike_is_kept():
    exp = build_experiment(config=None, method="fedhssl", dataset="digits", strengths=None, phase=None, jobs=None,
                           backend=None, device=None, attack=None, defense="iso", seeds="0",
                           overrides=["attack.phase=pretrain", "defenses.0.phase=pretrain"])
    assert exp.attack.phase == "pretrain" and [(d.name, d.phase, d.sweep) for d in exp.defenses] == [
        ("iso", "pretrain", True)]


def test_the_experiment_line_names_the_fixed_defenses_beside_the_swept_one():
    """Review l5: a fixed mid acting in every run read as "no defense" (alone) or went unsaid (beside --defense)."""
    from vflpriv.workflows.headers import experiment_line

    alone = ExperimentConfig.model_validate({"defenses": [{"name": "mid", "strength": 1}], "seeds": [0]})
    assert "; no defense swept; fixed: mid (finetune) at 1; seeds 0" in experiment_line(alone)
    both = ExperimentConfig.model_validate({"defenses": [{"name": "mid"}, {"name": "iso", "sweep": True}],
                                            "strengths": [1], "seeds": [0]})
    assert "defense iso (finetune) swept over 1; fixed: mid (finetune) at its identity; seeds 0" in experiment_line(both)


def test_tune_with_a_strength_fixed_by_an_option_names_tune_s_search_not_strengths(tmp_path, monkeypatch):
    """Review-hunt3 P9: tune, which has no --strengths, was told to give none beside options.target_epsilon."""
    output = refused_in_planning(["tune", "--dataset", "digits", "--seeds", "0", "--defense", "dp-gaussian", "--attack",
                                  "mc", "--set", "defenses.0.options.target_epsilon=1"],
                                 "tune searches dp-gaussian's sigma, but defenses.0.options.target_epsilon fixes it",
                                 tmp_path, monkeypatch)
    assert "--strengths" not in output
