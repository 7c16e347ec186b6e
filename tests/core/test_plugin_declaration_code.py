"""Review hunt3 P4: a plugin's declaration whose own code raises (``__eq__``, ``__float__``, a property, a metaclass
property) is refused in one line naming it and the valid choices; it escaped the checks with a traceback, and a
``phases`` that raised AttributeError was read as the default phases."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_helpers import one_error_line, refused_in_planning  # noqa: E402

PLUGIN = '''
import numbers

from vflpriv.attacks.base import Attack
from vflpriv.defenses.base import StrengthAxis
from vflpriv.defenses.nopeek import NoPeek


class Boom:
    def __eq__(self, other):
        raise RuntimeError("boom eq")

    def __hash__(self):
        return 1


class EqRaise(str):
    def __eq__(self, other):
        raise RuntimeError("eq ran")

    __hash__ = str.__hash__


class RealLie:
    def __float__(self):
        raise RuntimeError("float ran")


numbers.Real.register(RealLie)


class Raising(type(NoPeek)):
    @property
    def axis(cls):
        raise RuntimeError("axis property ran")


class Missing(type(NoPeek)):
    @property
    def phases(cls):
        raise AttributeError("no phases here")


class SecretRaising(type(Attack)):
    @property
    def secret(cls):
        raise ValueError("secret property ran")


class StrongerRaising(StrengthAxis):
    def __getattribute__(self, name):
        if name == "stronger":
            raise RuntimeError("stronger ran")
        return super().__getattribute__(name)


class StrongerBoom(NoPeek):
    axis = StrengthAxis("lambda", stronger=Boom())


class StrongerStrSub(NoPeek):
    axis = StrengthAxis("lambda", stronger=EqRaise("higher"))


class LowReal(NoPeek):
    axis = StrengthAxis("lambda", low=RealLie())


class AuditReal(NoPeek):
    audit_strengths = {"finetune": (RealLie(),)}


class ManyStrengths(NoPeek):
    audit_strengths = {"finetune": tuple(float(i) for i in range(1, 18))}


class KeyBoom(NoPeek):
    audit_strengths = {Boom(): (0.1,)}


class AxisMeta(NoPeek, metaclass=Raising):
    pass


class PhasesMeta(NoPeek, metaclass=Missing):
    pass


class AxisFieldProperty(NoPeek):
    axis = StrongerRaising("lambda")


class Guess(Attack, metaclass=SecretRaising):
    def infer(self, view):
        raise AssertionError("never run")


class BoolBoom:
    def __bool__(self):
        raise RuntimeError("bool ran")


class ReadsLabelsBoom(NoPeek):
    reads_labels = BoolBoom()


class ReadsLabelsStr(NoPeek):
    reads_labels = "no"


class ReadsFeaturesBoom(NoPeek):
    reads_features = BoolBoom()


class BinaryBoom(NoPeek):
    binary_only = BoolBoom()


class Majority(Attack):
    def infer(self, view):
        raise AssertionError("never run")


class NeedsEncoderBoom(Majority):
    needs_encoder = BoolBoom()


class BinaryAttackBoom(Majority):
    binary_only = BoolBoom()


class MessagesStr(Majority):
    required_messages = "gradient"
'''

#: Each class, the option naming it, and what its refusal says: the declaration, then the valid choices.
CASES = {
    "StrongerBoom": ("--defense", "its axis lambda: stronger is a Boom; give 'higher' or 'lower'"),
    "StrongerStrSub": ("--defense", "its axis lambda: stronger is a EqRaise; give 'higher' or 'lower'"),
    "LowReal": ("--defense", "its axis lambda: low is a RealLie; give an int or a float (numpy's too), not NaN"),
    "AuditReal": ("--defense", "its audit_strengths hold a tuple for finetune; give a dict from some of 'pretrain', "
                               "'finetune' to a non-empty tuple"),
    "ManyStrengths": ("--defense", "its audit_strengths hold 17 strengths for finetune; give at most 16"),
    "KeyBoom": ("--defense", "its audit_strengths name the phase a Boom; give a dict from some of 'pretrain'"),
    "AxisMeta": ("--defense", "its axis could not be read (RuntimeError: axis property ran); give a "
                              "vflpriv.defenses.base.StrengthAxis"),
    "PhasesMeta": ("--defense", "its phases could not be read (AttributeError: no phases here); give a tuple of some "
                                "of 'pretrain', 'finetune'"),
    "AxisFieldProperty": ("--defense", "its axis lambda: stronger could not be read (RuntimeError: stronger ran); "
                                       "give 'higher' or 'lower'"),
    "Guess": ("--attack", "its secret could not be read (ValueError: secret property ran); an attack infers 'labels' "
                          "or 'features'"),
    "ReadsLabelsBoom": ("--defense", "its reads_labels is a BoolBoom; give True or False"),
    "ReadsLabelsStr": ("--defense", "its reads_labels is 'no'; give True or False"),
    "ReadsFeaturesBoom": ("--defense", "its reads_features is a BoolBoom; give True or False"),
    "BinaryBoom": ("--defense", "its binary_only is a BoolBoom; give True or False"),
    "NeedsEncoderBoom": ("--attack", "its needs_encoder is a BoolBoom; give True or False"),
    "BinaryAttackBoom": ("--attack", "its binary_only is a BoolBoom; give True or False"),
    "MessagesStr": ("--attack", "its required_messages is 'gradient'; give a method (phase) -> the messages it reads"),
}


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    (tmp_path / "hunt3_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_declaration_whose_code_raises_is_refused_in_one_line(plugin, monkeypatch, name):
    option, needle = CASES[name]
    other = ["--attack", "mc", "--strengths", "0.1"] if option == "--defense" else ["--defense", "none"]
    out = refused_in_planning(["evaluate", option, f"hunt3_plugin:{name}", *other, "--seeds", "0"], needle, plugin,
                              monkeypatch)
    assert f"'hunt3_plugin:{name}' is not a vflpriv" in out


MEMBERS = '''
from vflpriv.auditors.gradient_lrt import GradientLRT
from vflpriv.methods.splitnn import SplitNN


class FederatedRaising(type(SplitNN)):
    @property
    def federated(cls):
        raise RuntimeError("federated ran")


class AuditsRaising(type(GradientLRT)):
    @property
    def audits(cls):
        raise RuntimeError("audits ran")


class FederatedMeta(SplitNN, metaclass=FederatedRaising):
    pass


class AuditsMeta(GradientLRT, metaclass=AuditsRaising):
    pass
'''


@pytest.mark.parametrize("name, needle", [
    ("FederatedMeta", "method: its federated could not be read (RuntimeError: federated ran); define it as "
                      "vflpriv.methods.base.Method does"),
    ("AuditsMeta", "auditor: its audits could not be read (RuntimeError: audits ran); define it as "
                   "vflpriv.auditors.base.Auditor does"),
])
def test_a_method_or_auditor_member_whose_code_raises_is_refused_in_one_line(tmp_path, monkeypatch, name, needle):
    """A method's or an auditor's member was only looked up (getattr_static): a metaclass property that raises passed
    the registry and escaped ``describe`` with a traceback (review decl's leftover)."""
    from typer.testing import CliRunner

    from vflpriv.cli import app

    (tmp_path / "members_plugin.py").write_text(MEMBERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    result = CliRunner().invoke(app, ["describe", f"members_plugin:{name}"])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, needle)
