"""Two ``--set`` values for one setting, in one spelling or two, or a setting inside a section another ``--set`` sets
whole, are refused in planning whatever their order (review-hunt3 P2: last-wins, silently); an identical repeat
passes."""

from __future__ import annotations

import pytest
from cli_helpers import refused_in_planning

from vflpriv.config.overrides import apply_overrides

BASE = ["evaluate", "--dataset", "digits", "--attack", "mc", "--defense", "dp-gaussian", "--strengths", "1",
        "--seeds", "0"]
REPEATS = [
    (["defenses[0].options.clip=-1", "defenses.0.options.clip=2"], "--set defenses.0.options.clip is given twice "
                                                                   "(-1, 2)"),
    (["defenses.0.options.clip=2", "defenses[0].options.clip=-1"], "--set defenses.0.options.clip is given twice "
                                                                   "(2, -1)"),
    (["finetune.epochs=-1", "finetune.epochs=2"], "--set finetune.epochs is given twice (-1, 2); give it once"),
    (["attack.options.mc.epochs=1", "attack.options={fi-decoder: {epochs: 2}}"],
     "'--set attack.options.mc.epochs=1' is inside the section '--set attack.options={fi-decoder: {epochs: 2}}'"),
    (["attack.options={mc: {epochs: 2}}", "attack.options.mc.epochs=1"],
     "'--set attack.options.mc.epochs=1' is inside the section '--set attack.options={mc: {epochs: 2}}'"),
    (["partition.labeled.x=1", "partition.labeled=3"],  # the value after the key dropped it
     "--set partition.labeled.x: 'partition.labeled' is a value, not a section ('--set partition.labeled=3')"),
]


@pytest.mark.parametrize(("sets", "needle"), REPEATS, ids=[" ".join(s)[:50] for s, _ in REPEATS])
def test_two_values_for_one_setting_are_refused(sets, needle, tmp_path, monkeypatch):
    args = [part for assignment in sets for part in ("--set", assignment)]
    refused_in_planning([*BASE, *args], needle, tmp_path, monkeypatch)


def test_an_identical_repeat_in_either_spelling_passes():
    data = {"defenses": [{"name": "dp-gaussian"}]}
    apply_overrides(data, ["defenses[0].options.clip=2", "defenses.0.options.clip=2", "finetune.epochs=1",
                           "finetune.epochs=1"])
    assert data["defenses"][0]["options"] == {"clip": 2} and data["finetune"] == {"epochs": 1}


def test_sweep_refuses_them_too(tmp_path, monkeypatch):
    grid = tmp_path / "grid.yaml"
    grid.write_text("methods: [splitnn]\nattacks: [mc]\nseeds: [0]\n")
    refused_in_planning(["sweep", str(grid), "--set", "finetune.epochs=1", "--set", "finetune.epochs=2"],
                        "--set finetune.epochs is given twice (1, 2)", tmp_path, monkeypatch)


@pytest.mark.parametrize(("args", "needle"), [
    (["--canaries", "5", "--set", "partition.canaries=0"], "--canaries sets partition.canaries=5, but a --set makes "
                                                            "it 0"),
    (["--jobs", "1", "--set", "jobs=3"], "--jobs sets jobs=1, but a --set makes it 3; give one of them")])
def test_sweep_refuses_an_option_and_a_set_that_disagree(args, needle, tmp_path, monkeypatch):
    """As evaluate, audit and tune do (the --set won silently)."""
    grid = tmp_path / "grid.yaml"
    grid.write_text("methods: [splitnn]\nattacks: [mc]\nseeds: [0]\n")
    refused_in_planning(["sweep", str(grid), *args], needle, tmp_path, monkeypatch)


def test_sweep_refuses_an_option_into_a_grid_s_value_where_a_section_is_read(tmp_path, monkeypatch):
    grid = tmp_path / "grid.yaml"
    grid.write_text("methods: [splitnn]\nattacks: [mc]\nseeds: [0]\npartition: 3\n")
    refused_in_planning(["sweep", str(grid), "--canaries", "5"], "--canaries sets partition.canaries, but 'partition' "
                        "is a value, not a section", tmp_path, monkeypatch)
