"""Hostile settings of the feature side that the planner must refuse (one ``error:`` line naming the problem and what
is valid, exit code 2, nothing written): options a feature defense cannot honour on the victim's data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_helpers import one_error_line, wrote_nothing
from typer.testing import CliRunner

from vflpriv.cli import app

CASES = [
    # fi-adversarial's imagined decoder and its measure on a tabular victim (they failed inside the training)
    (["--dataset", "breast-cancer", "--defense", "fi-adversarial", "--set", "defenses.0.options.loss=ssim"],
     "options.loss=ssim scores images; party 1's features are tabular: use mse or auto"),
    (["--dataset", "breast-cancer", "--defense", "fi-adversarial", "--set", "defenses.0.options.decoder=conv"],
     "options.decoder=conv decodes to images; party 1's features are tabular: use mlp or auto"),
    # a bottleneck no memory holds (2^31 - 1 wide): refused by its bound, not by the allocator
    (["--defense", "fi-adversarial", "--set", "defenses.0.options.bottleneck=2147483647"],
     "defenses[0].options.bottleneck=2147483647"),
]


@pytest.mark.parametrize(("args", "needle"), CASES, ids=[" ".join(a)[:70] for a, _ in CASES])
def test_a_feature_defense_option_the_victim_s_data_cannot_take_is_refused_before_anything_is_written(
        args, needle, tmp_path, monkeypatch):
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    with wrote_nothing(tmp_path, Path(os.environ["VFLPRIV_CACHE"])):
        result = CliRunner().invoke(app, ["evaluate", "--attack", "fi-decoder", "--seeds", "0", "--strengths", "1",
                                          *args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, needle)


def test_a_dataset_with_a_nan_victim_feature_is_refused_in_one_line_before_training(tmp_path, monkeypatch):
    """A plugin dataset (a user's CSV) with a NaN in the victim's features: every feature score would be NaN."""
    import math

    import torch

    from vflpriv.config.registry import DATASETS
    from vflpriv.data.base import PartySpec, VerticalDataset

    def load(**_):
        g = torch.Generator().manual_seed(0)
        x = [torch.rand(1000, 4, generator=g) for _ in range(2)]
        t = [torch.rand(100, 4, generator=g) for _ in range(2)]
        x[1][5, 2] = math.nan
        spec = PartySpec("tabular", (4,))
        return VerticalDataset("nan-csv", tuple(x), (x[0].sum(1) > 2).long(), tuple(t), (t[0].sum(1) > 2).long(), 2,
                               (spec, spec))

    DATASETS.register("test-nan-csv", load)
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    with wrote_nothing(tmp_path, Path(os.environ["VFLPRIV_CACHE"])):
        result = CliRunner().invoke(app, ["evaluate", "--dataset", "test-nan-csv", "--attack", "fi-decoder", "--seeds",
                                          "0", "--set", "partition.labeled=150", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, "party 1's training features hold 1 non-finite value (first at row 5, column 2)")


@pytest.mark.parametrize(("module", "body", "needle"), [
    ("hostile_secret", "secret = 'weights'", "its secret is 'weights'; an attack infers 'labels' or 'features'"),
    ("hostile_roles", "roles = frozenset({'boss'})",
     "its roles are frozenset({'boss'}); they must be some of 'active', 'passive'"),
])
def test_an_attack_plugin_with_an_unknown_secret_or_role_is_refused_naming_it(module, body, needle, tmp_path,
                                                                                monkeypatch):
    """An unknown secret failed deep in planning with a KeyError (no prior and no scores exist for it); unknown roles
    with a sentence naming none."""
    (tmp_path / f"{module}.py").write_text("from vflpriv.attacks.features.decoder_attack import FeatureDecoder\n\n"
                                               f"class Hostile(FeatureDecoder):\n    {body}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with wrote_nothing(tmp_path):
        result = CliRunner().invoke(app, ["evaluate", "--attack", f"{module}:Hostile", "--seeds", "0",
                                          "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, f"'{module}:Hostile' is not a vflpriv attack: {needle}")


@pytest.mark.parametrize(("command", "secret"), [
    (["evaluate", "--attack"], ""), (["evaluate", "--attack"], "secret = 'labels'"),
    (["audit", "--method", "splitnn", "--quick", "--attacks"], "secret = 'labels'"),
    (["evaluate", "--set", "partition.aux_features=4", "--attack"], ""),
])
def test_an_attack_plugin_that_is_no_attack_subclass_is_refused_naming_the_base(command, secret, tmp_path,
                                                                                  monkeypatch):
    """A class with infer, required_messages and needs_encoder passed the registry and failed in planning with an
    AttributeError traceback on the first of the Attack base's attributes it lacked (secret, then binary_only)."""
    module = f"duck_attack_{len(secret)}"
    (tmp_path / f"{module}.py").write_text(
        f"class Duck:\n    required_messages = frozenset({{'gradient'}})\n    needs_encoder = False\n    {secret}\n\n"
        "    def __init__(self, options=None):\n        self.options = options\n\n"
        "    def infer(self, view):\n        raise NotImplementedError\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with wrote_nothing(tmp_path):
        result = CliRunner().invoke(app, [*command, f"{module}:Duck", "--out", str(tmp_path / "out"), "--dry-run"])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, f"'{module}:Duck' is not a vflpriv attack: expected a subclass of "
                                  "vflpriv.attacks.base.Attack")


DUCK_DEFENSE = "protects = frozenset({'labels'})\n    axis = None\n    supported_kinds = ()"
DUCK_METHOD = "pretrain = finetune = predict = sends = None\n    pretrains = False\n    federated = True"


@pytest.mark.parametrize(("command", "body", "needle"), [
    (["evaluate", "--defense"], DUCK_DEFENSE, "defense: expected a subclass of vflpriv.defenses.base.Protection"),
    (["audit", "--method", "splitnn", "--quick", "--defenses"], DUCK_DEFENSE,
     "defense: expected a subclass of vflpriv.defenses.base.Protection"),
    (["evaluate", "--method"], DUCK_METHOD, "method: expected a subclass of vflpriv.methods.base.Method"),
])
def test_a_defense_or_method_plugin_that_is_no_subclass_of_its_base_is_refused_naming_it(command, body, needle,
                                                                                           tmp_path, monkeypatch):
    """As for attacks: the members the registry checked passed, and planning failed on the first of the base's
    attributes it lacked (a defense's own_strength_option) with an AttributeError traceback."""
    module = f"duck_{len(command)}_{len(body)}"
    (tmp_path / f"{module}.py").write_text(f"class Duck:\n    {body}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with wrote_nothing(tmp_path):
        result = CliRunner().invoke(app, [*command, f"{module}:Duck", "--dry-run"])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, f"'{module}:Duck' is not a vflpriv {needle}")
    assert CliRunner().invoke(app, ["describe", f"{module}:Duck"]).exit_code == 2  # it read default_kinds: a traceback
