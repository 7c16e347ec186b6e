"""Review final14 F6: a plugin under a built-in's name shared the built-in's run and training keys (each resumed the
other's records), and an edited plugin defense kept its keys (its pretraining key too: eps5's left): a built-in's name
is refused, registered or installed (one ``error:`` line), and a plugin defense's code is in its keys; the built-ins'
keys are unchanged."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_helpers import refused_in_planning  # noqa: E402

from vflpriv.common.errors import ConfigError  # noqa: E402
from vflpriv.config.registry import DEFENSES, METHODS  # noqa: E402
from vflpriv.config.schema import RunConfig, TrainingConfig  # noqa: E402
from vflpriv.defenses.base import StrengthAxis  # noqa: E402
from vflpriv.defenses.label_dp import LabelDP  # noqa: E402
from vflpriv.defenses.passive import PASSIVE_LOSS, PassiveDefense  # noqa: E402
from vflpriv.runner.execution import pretrain_key  # noqa: E402
from vflpriv.store import cache  # noqa: E402


def _config(name: str) -> RunConfig:
    return RunConfig.model_validate({"partition": {"labeled": 100, "aux": 40}, "attack": {"name": "gc"},
                                     "defenses": [{"name": name, "strength": 1.0, "sweep": True}]})


class _Mine(LabelDP):
    reads_labels = False

    def relabel(self, labels, *, num_classes):
        return labels.clone()


class _Edited(_Mine):
    """The same plugin after its author edited ``relabel``."""

    def relabel(self, labels, *, num_classes):
        return labels.flip(0)


def test_a_plugin_registered_under_a_built_in_s_name_is_refused():
    with pytest.raises(ConfigError, match="cannot register a defense as 'label-dp': that is a built-in defense's name"):
        DEFENSES.register("label-dp", _Mine)
    assert DEFENSES.get("label-dp") is LabelDP


def _installed_as(name: str, tmp_path, monkeypatch) -> None:
    """A package 'shadow' installed on the path, declaring its defense under ``name``; the entry points read again."""
    info = tmp_path / "shadow-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: shadow\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[vflpriv.defenses]\n{name} = shadow_plugin:Mine\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(DEFENSES, "_installed", None)  # read the entry points again, with the plugin's
    monkeypatch.setattr(DEFENSES, "_cache", {})


def test_an_installed_plugin_under_a_built_in_s_name_is_one_error_line(tmp_path, monkeypatch):
    _installed_as("label-dp", tmp_path, monkeypatch)
    refused_in_planning(["evaluate", "--defense", "label-dp", "--strengths", "1"],
                        "the installed package 'shadow' declares defense 'label-dp' (shadow_plugin:Mine), a built-in "
                        "defense's name", tmp_path, monkeypatch)
    assert DEFENSES.get("iso").__name__ == "IsotropicNoise"


def test_an_installed_plugin_under_a_built_in_s_name_in_another_case_is_refused(tmp_path, monkeypatch):
    """Review misc F9: ``register`` refused 'LABEL-DP', an installed entry point under it was listed and used."""
    _installed_as("LABEL-DP", tmp_path, monkeypatch)
    assert "LABEL-DP" not in DEFENSES.names()
    refused_in_planning(["evaluate", "--defense", "LABEL-DP", "--strengths", "1"],
                        "the installed package 'shadow' declares defense 'LABEL-DP' (shadow_plugin:Mine), a built-in "
                        "defense's name ('label-dp') in another case", tmp_path, monkeypatch)
    assert DEFENSES.get("label-dp") is LabelDP


def test_a_plugin_defense_s_code_is_in_its_keys_and_a_built_in_s_keys_are_unchanged(monkeypatch):
    keys = []
    for cls in (_Mine, _Edited):
        monkeypatch.setitem(DEFENSES._extra, "t-mine", cls)
        keys.append((_config("t-mine").key(), _config("t-mine").training_key()))
    assert keys[0][0] != keys[1][0] and keys[0][1] != keys[1][1]
    assert (_config("label-dp").key(), _config("label-dp").training_key()) == LABEL_DP_KEYS


#: label-dp's keys for :func:`_config` as main (2f4ad98) computed them: a stored built-in record stays current.
LABEL_DP_KEYS = ("9c4766ef8202687bc07c", "8358abb28232dc865fbc")


class _Quiet(PassiveDefense):
    """A plugin acting in pretraining: lambda times the mean squared embedding, in the passive party's own loss."""

    hook_points = frozenset({PASSIVE_LOSS})
    phases = ("finetune", "pretrain")
    axis = StrengthAxis(name="lambda", stronger="higher", identity=0.0)
    reads_labels = reads_features = False

    def passive_loss(self, party, phase, x, sent):
        return self.strength * sent.pow(2).mean() if self.acts_for(party, phase) else None


class _QuietEdited(_Quiet):
    """The same plugin after its author edited ``passive_loss``."""

    def passive_loss(self, party, phase, x, sent):
        return self.strength * sent.abs().mean() if self.acts_for(party, phase) else None


def _pretrain_key(name: str) -> str:
    config = TrainingConfig.model_validate({"method": {"name": "fedhssl"}, "defenses": [
        {"name": name, "strength": 1.0, "phase": "pretrain", "party": 1}]})
    return pretrain_key(config, METHODS.get("fedhssl"))


def test_an_edited_plugin_acting_in_pretraining_pretrains_anew_and_a_built_in_s_key_is_unchanged(monkeypatch):
    """eps5's left: the pretraining key held no plugin defense's code, so an edited one reused a stale pretraining."""
    monkeypatch.setattr(cache, "code_version", lambda: "fixed")  # vflpriv's own source, edited by any commit
    keys = []
    for cls in (_Quiet, _QuietEdited):
        monkeypatch.setitem(DEFENSES._extra, "t-quiet", cls)
        keys.append(_pretrain_key("t-quiet"))
    assert keys[0] != keys[1]
    assert _pretrain_key("nopeek") == NOPEEK_PRETRAIN_KEY


#: nopeek's pretraining key for :func:`_pretrain_key` (code version "fixed") as main (ccdad5f) computed it.
NOPEEK_PRETRAIN_KEY = "3bc2229240c48ee7505ddbc7"
