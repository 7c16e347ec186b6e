"""A ``--set`` key as vflpriv prints it to the user (``describe``'s options line, a refused setting's place) is one
``--set`` accepts, and its value reaches the defense's options (``defenses[i]`` was refused as an unknown setting)."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from vflpriv.cli import app
from vflpriv.common.errors import ConfigError
from vflpriv.config.overrides import apply_override
from vflpriv.config.registry import DEFENSES


def _options_set_by(key: str, tmp_path, monkeypatch) -> dict:
    """dp-gaussian's options after ``evaluate --set KEY=0.5 --dry-run`` (the validated experiment, as planned)."""
    seen = []
    monkeypatch.setattr("vflpriv.workflows.experiment.evaluate_experiment", lambda exp, *a, **k: seen.append(exp))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["evaluate", "--dataset", "digits", "--seeds", "0", "--defense", "dp-gaussian",
                                      "--strengths", "1", "--set", f"{key}=0.5", "--dry-run"])
    assert result.exit_code == 0, result.output
    return DEFENSES.get("dp-gaussian").Options.model_validate(seen[0].defenses[0].options).model_dump()


def test_the_key_describe_prints_filled_in_reaches_the_defense_s_options(tmp_path, monkeypatch):
    shown = CliRunner().invoke(app, ["describe", "dp-gaussian"]).output
    prefix = re.search(r"options \((\S+)NAME=VALUE\)", shown).group(1)
    filled = re.sub(r"(?<=[.\[])[A-Za-z](?=[.\]])", "0", prefix)  # the one defense's place, from 0
    assert filled != prefix
    assert _options_set_by(f"{filled}clip", tmp_path, monkeypatch)["clip"] == 0.5


def test_the_place_a_refused_setting_names_is_a_key_set_accepts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    refused = CliRunner().invoke(app, ["evaluate", "--dataset", "digits", "--seeds", "0", "--defense", "dp-gaussian",
                                       "--strengths", "1", "--set", "defenses.0.options.clip=-1", "--dry-run"])
    assert refused.exit_code == 2
    key = re.search(r"error: invalid (\S+)=-1", refused.output).group(1)
    assert key == "defenses[0].options.clip"
    assert _options_set_by(key, tmp_path, monkeypatch)["clip"] == 0.5


@pytest.mark.parametrize(("key", "path"), [("audit.defenses[1].strengths", ("audit", "defenses", 1, "strengths")),
                                           ("seeds[1]", ("seeds", 1)), ("grid[0][1]", ("grid", 0, 1))])
def test_a_bracketed_index_is_the_dotted_one(key, path):
    data = {"audit": {"defenses": [{}, {}]}, "seeds": [0, 1], "grid": [[0, 1]]}
    apply_override(data, f"{key}=7")
    node = data
    for part in path:
        node = node[part]
    assert node == 7


@pytest.mark.parametrize("key", ["seeds[2]", "seeds.[0]"])
def test_a_bracketed_index_outside_the_list_or_after_a_dot_is_refused(key):
    with pytest.raises(ConfigError):
        apply_override({"seeds": [0, 1]}, f"{key}=7")


KINDS = [("local-a", "supervised_epochs", 3, ["method.name=local-a"]), ("mc", "epochs", 7, []),
         ("dp-gaussian", "clip", 0.5, []),
         ("gradient-lrt", "menu", "fine", ["finetune.auditor=gradient-lrt", "partition.canaries=20"])]


@pytest.mark.parametrize(("name", "option", "value", "sets"), KINDS, ids=[k[0] for k in KINDS])
def test_every_kind_s_printed_options_key_is_one_set_accepts(name, option, value, sets, tmp_path, monkeypatch):
    """A method's, an attack's, a defense's and an auditor's options line (review misc F3: the auditor's printed
    ``menu=VALUE``, which --set refused as an unknown setting)."""
    prefix = re.search(r"options \((\S*)NAME=VALUE\)", CliRunner().invoke(app, ["describe", name]).output).group(1)
    key = re.sub(r"(?<=[.\[])[A-Za-z](?=[.\]])", "0", prefix) + option
    seen = []
    monkeypatch.setattr("vflpriv.workflows.experiment.evaluate_experiment", lambda exp, *a, **k: seen.append(exp))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["evaluate", "--dataset", "digits", "--seeds", "0", "--defense", "dp-gaussian",
                                      "--strengths", "1", *(a for s in sets for a in ("--set", s)), "--set",
                                      f"{key}={value}", "--dry-run"])
    assert result.exit_code == 0, result.output
    node = seen[0].model_dump()
    for part in re.split(r"[.\[\]]+", key.strip("]")):
        node = node[int(part) if part.isdigit() else part]
    assert node == value


@pytest.mark.parametrize(("key", "index"), [("defenses[0.5]", "0.5"), ("defenses[-1]", "-1"), ("defenses.-1", "-1"),
                                            ("defenses[x]", "x"), ("defenses[]", "")])
def test_a_bad_index_in_brackets_gets_the_dotted_form_s_message(key, index):
    """Brackets are read before the '.' split (review-hunt3 P3: ``defenses[0.5]`` was named ``defenses[0``, and a
    bracketed bad index got "unknown setting" where the dotted one got the index rule)."""
    with pytest.raises(ConfigError) as refused:
        apply_override({"defenses": [{}]}, f"{key}.options.clip=2")
    said = f"--set {key}.options.clip: 'defenses' is a list of 1; give an index 0..0, got '{index}'"
    assert str(refused.value) == said
