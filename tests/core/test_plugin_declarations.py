"""Review hunt2 N2-N7: an attack's or a defense's declarations are checked once where the registry resolves a
``package.module:Class`` or registers a class, each refusal one line naming the bad value and the valid choices
(they crashed planning, the audit or ``describe`` with a traceback, failed after training, or named nothing)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from vflpriv.common.errors import ConfigError, VflprivError
from vflpriv.config.registry import ATTACKS, DEFENSES, Registry

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_helpers import one_error_line, refused_in_planning  # noqa: E402

PLUGIN = '''
from vflpriv.attacks.base import Attack
from vflpriv.attacks.features.base import FeatureAttack
from vflpriv.defenses.base import StrengthAxis
from vflpriv.defenses.nopeek import NoPeek


class Maj(Attack):
    def infer(self, view):
        raise AssertionError("never run")


class MajFeat(Maj):
    secret = "features"
    roles = frozenset({"active"})


class KM(FeatureAttack):
    def infer(self, view):
        raise AssertionError("never run")


class KMLabels(KM):
    secret = "labels"


class KMObsStr(KM):
    observes = "embedding"


class KMObsWeights(KM):
    observes = ("weights",)


class AuditNaN(NoPeek):
    audit_strengths = {"finetune": (float("nan"),)}


class AuditNeg(NoPeek):
    audit_strengths = {"finetune": (-1.0,)}


class EmbeddingAuditPhase(NoPeek):
    embedding_audit_strengths = {"inference": (1.0,)}


class AxisStr(NoPeek):
    axis = "lambda"


class PhasesBad(NoPeek):
    phases = ("inference",)


class NoHooks(NoPeek):
    hook_points = frozenset()


class BadHook(NoPeek):
    hook_points = frozenset({"defend:nowhere"})


class NoReason(NoPeek):
    phases = ("finetune",)


class AxisNoneLow(NoPeek):
    axis = StrengthAxis("alpha", low=None)


class AxisStrHigh(NoPeek):
    axis = StrengthAxis("alpha", high="10")


class AxisNaNLow(NoPeek):
    axis = StrengthAxis("alpha", low=float("nan"))


class AxisLogSearch(NoPeek):
    axis = StrengthAxis("alpha", search=(0.0, 1.0))
'''

#: Each bad class, its registry, and what its refusal names: the bad value, then the valid choices.
CASES = {
    "MajFeat": (ATTACKS, "it infers features but is not a FeatureAttack (subclass "
                         "vflpriv.attacks.features.base.FeatureAttack)"),
    "KMLabels": (ATTACKS, "it is a FeatureAttack but its secret is 'labels'; a FeatureAttack infers 'features'"),
    "KMObsStr": (ATTACKS, "its observes is 'embedding'; give a tuple of the per-sample messages it reconstructs "
                          "from, some of 'embedding', 'gradient'"),
    "KMObsWeights": (ATTACKS, "its observes is ('weights',); give a tuple"),
    "AuditNaN": (DEFENSES, "its audit_strengths hold (nan,) for finetune; give a dict from some of 'pretrain', "
                           "'finetune' to a non-empty tuple of distinct finite strengths in [0, 1e+06]"),
    "AuditNeg": (DEFENSES, "its audit_strengths hold (-1.0,) for finetune; give"),
    "EmbeddingAuditPhase": (DEFENSES, "its embedding_audit_strengths name the phase 'inference'; give"),
    "AxisStr": (DEFENSES, "its axis is 'lambda'; give a vflpriv.defenses.base.StrengthAxis"),
    "PhasesBad": (DEFENSES, "its phases are ('inference',); give a tuple of some of 'pretrain', 'finetune'"),
    "NoHooks": (DEFENSES, "its hook_points are frozenset(); give a non-empty set of some of 'defend:active-backward'"),
    "AxisNoneLow": (DEFENSES, "its axis alpha: low is None; give an int or a float (numpy's too), not NaN"),
    "AxisStrHigh": (DEFENSES, "its axis alpha: high is '10'; give an int or a float (numpy's too), not NaN"),
    "AxisNaNLow": (DEFENSES, "its axis alpha: low is nan; give an int or a float (numpy's too), not NaN"),
    "AxisLogSearch": (DEFENSES, "its axis alpha: search is (0.0, 1.0); give a tuple (lo, hi) of finite numbers with "
                                "lo < hi, lo > 0 (a log scale)"),
    "BadHook": (DEFENSES, "its hook_points are frozenset({'defend:nowhere'}); give a non-empty set of some of"),
}


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    (tmp_path / "hunt2_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_bad_declaration_is_refused_by_path_and_by_register(plugin, name):
    import importlib

    registry, needle = CASES[name]
    with pytest.raises(VflprivError, match="is not a vflpriv") as by_path:
        registry.get(f"hunt2_plugin:{name}")
    assert needle in str(by_path.value)
    fresh = Registry(registry.kind, registry.group, registry.check)
    with pytest.raises(ConfigError, match=f"cannot register an? {registry.kind} as 'x'") as registered:
        fresh.register("x", getattr(importlib.import_module("hunt2_plugin"), name))
    assert needle in str(registered.value) and "x" not in fresh.names()


def test_a_built_in_s_name_in_another_case_is_refused():
    fresh = Registry("attack", "vflpriv.attacks", ATTACKS.check)
    with pytest.raises(ConfigError, match=r"built-in attack's name \('mc'\) in another case"):
        fresh.register("MC", ATTACKS.get("mc"))


@pytest.mark.parametrize("args", [["--attack", "hunt2_plugin:MajFeat", "--defense", "none"],
                                  ["--attack", "hunt2_plugin:KMLabels", "--defense", "none"],
                                  ["--defense", "hunt2_plugin:AxisStr", "--strengths", "1"],
                                  ["--defense", "hunt2_plugin:AxisNoneLow", "--strengths", "1"]])
def test_evaluate_refuses_in_one_line_before_anything_trains(plugin, monkeypatch, args):
    refused_in_planning(["evaluate", *args, "--seeds", "0"], "is not a vflpriv", plugin, monkeypatch)


def test_describe_names_the_declaration(plugin, monkeypatch):
    from typer.testing import CliRunner

    from vflpriv.cli import app

    monkeypatch.chdir(plugin)
    result = CliRunner().invoke(app, ["describe", "hunt2_plugin:AxisStr"])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, "its axis is 'lambda'; give a vflpriv.defenses.base.StrengthAxis")


def test_a_phase_refused_without_a_reason_names_the_valid_phases(plugin, monkeypatch):
    """The refusal read 'acts in finetune only: ' (a plugin gives no phase_reason)."""
    out = refused_in_planning(["evaluate", "--defense", "hunt2_plugin:NoReason", "--phase", "pretrain", "--strengths",
                               "1", "--seeds", "0", "--method", "fedhssl"], "acts in finetune only; use phase finetune",
                              plugin, monkeypatch)
    assert "only: " not in out


def test_audit_strengths_of_numpy_reals_are_accepted():
    """Review misc2 M3: numpy floats, accepted before the checks, were refused as 'a tuple'; bool stays refused."""
    import numpy as np

    from vflpriv.config.plugin_checks import defense_problem
    from vflpriv.defenses.nopeek import NoPeek

    numpy_reals = type("NumpyReals", (NoPeek,), {"audit_strengths": {"finetune": (np.float64(0.5), np.float32(2.0))}})
    assert defense_problem(numpy_reals) is None
    boolean = type("Boolean", (NoPeek,), {"audit_strengths": {"finetune": (True,)}})
    assert "its audit_strengths hold (True,) for finetune" in defense_problem(boolean)
