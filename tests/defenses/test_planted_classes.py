"""Review final14 F5: a class is vflpriv's own only where vflpriv's files define it and every function it holds; a
plugin class planted into a vflpriv module (``__module__`` set, or built with ``type()``), a built-in whose method was
replaced, or a module a plugin adds to ``sys.modules`` under vflpriv's name keeps no epsilon and gets a code mark."""

from __future__ import annotations

import math
import sys
import types

import pytest
from pydantic import BaseModel

import vflpriv.defenses.label_dp as label_dp_module
from vflpriv.attacks.labels.model_completion import ModelCompletion
from vflpriv.common.declarations import vflpriv_own
from vflpriv.config.keys import code_mark
from vflpriv.config.registry import ATTACKS, DEFENSES
from vflpriv.config.schema import RunConfig
from vflpriv.defenses.label_dp import LabelDP
from vflpriv.runner.claims import foreign_accounting
from vflpriv.runner.execution import run

MODULE = "vflpriv.defenses.label_dp"


def _clean(self, labels, *, num_classes):
    return labels.clone()


class Injected(LabelDP):
    """label-dp keeping every label, then named as a class of label_dp's module."""

    relabel = _clean


Injected.__module__, Injected.__qualname__ = MODULE, "Injected"
Built = type("Built", (LabelDP,), {"__module__": MODULE, "relabel": lambda self, labels, *, num_classes: labels})


class _Spoofed(ModelCompletion):
    """An attack plugin naming a vflpriv module."""

    def infer(self, *args, **kwargs):
        return super().infer(*args, **kwargs)


_Spoofed.__module__ = "vflpriv.attacks.spoofed"


@pytest.fixture
def disguised(monkeypatch):
    """The disguised plugins registered for one test only: a registry naming them for good would show them, built-ins
    by their module's name, to every later test of the worker (the audit's attacks, the defense reference's rows)."""
    for registry, name, cls in ((DEFENSES, "t-injected", Injected), (DEFENSES, "t-built", Built),
                                (ATTACKS, "t-spoofed", _Spoofed)):
        monkeypatch.setitem(registry._extra, name, cls)
    return monkeypatch


def _record(name: str):
    (record,) = run(RunConfig.model_validate({
        "partition": {"labeled": 100, "aux": 40}, "model": {"hidden": 32, "out_dim": 16},
        "finetune": {"epochs": 1, "batch_size": 32}, "attack": {"name": "gc", "prior": "none"},
        "defenses": [{"name": name, "strength": 1.0, "sweep": True}]}))
    return record


def test_a_class_planted_into_a_vflpriv_module_keeps_no_epsilon(disguised):
    disguised.setattr(label_dp_module, "Injected", Injected, raising=False)
    disguised.setattr(label_dp_module, "Built", Built, raising=False)
    for name, cls in (("t-injected", "Injected"), ("t-built", "Built")):
        record = _record(name)
        assert math.isnan(record.epsilon), name
        assert f"{name}: no epsilon recorded" in record.notes
        assert f"{name}: its own code ({cls}.relabel())" in record.notes


def test_a_built_in_whose_mechanism_was_replaced_keeps_no_epsilon(monkeypatch):
    assert _record("label-dp").epsilon == 1.0
    monkeypatch.setattr(LabelDP, "relabel", _clean)
    record = _record("label-dp")
    assert math.isnan(record.epsilon)
    assert "label-dp: no epsilon recorded: label-dp: " in record.notes
    assert "label-dp: its own code (LabelDP.relabel()" in record.notes


def test_a_module_a_plugin_adds_under_vflpriv_s_name_names_no_vflpriv_folder(monkeypatch, tmp_path):
    module = types.ModuleType("vflpriv.plugged")
    module.__path__, module.__file__ = [str(tmp_path)], str(tmp_path / "__init__.py")
    module.Plugged = type("Plugged", (LabelDP,), {"__module__": "vflpriv.plugged", "revision": 7})
    monkeypatch.setitem(sys.modules, "vflpriv.plugged", module)
    assert not vflpriv_own(module.Plugged) and vflpriv_own(LabelDP)


def test_an_attack_plugin_naming_a_vflpriv_module_is_keyed_by_its_code(disguised):
    assert "code" in code_mark(ATTACKS, "t-spoofed") and code_mark(ATTACKS, "mc") == {}


class _Clean:
    """A class put in place of a method: calling it through the class runs its ``__new__``."""

    def __new__(cls, labels, *, num_classes):
        return labels.clone()


def test_a_built_in_method_replaced_by_a_class_is_not_vflpriv_s_own(monkeypatch):
    """Review eps5 R1: a member that is a class counted as no code, so ``privacy_spent = float`` kept the claim."""
    assert vflpriv_own(LabelDP)
    planted = type("Planted", (), {"__module__": MODULE, "__new__": lambda cls, *a, **k: 0.0})
    monkeypatch.setattr(label_dp_module, "Planted", planted, raising=False)  # review l7 1: defined "in" vflpriv
    for replacement in (float, staticmethod(float), _Clean, planted):
        monkeypatch.setattr(LabelDP, "privacy_spent", replacement)
        assert not vflpriv_own(LabelDP), replacement
    monkeypatch.undo()
    assert vflpriv_own(LabelDP)


class _Zero(BaseModel):
    """A plugin's pydantic model, to be planted: calling it runs the plugin's ``__new__``."""

    def __new__(cls, *args, **kwargs):
        return 0.0


class _Unplanted(_Zero):
    """The same model under another name, left in the plugin's module."""


class _ZeroBase(_Unplanted):
    """A model with no code of its own, to be planted, on the plugin's model."""


def test_a_planted_pydantic_class_is_neither_a_method_nor_an_options_model(monkeypatch):
    """Review l8 3: a class member counted as no code where it was a pydantic model defined "in" vflpriv (planted),
    so a planted class holding one in place of ``privacy_spent`` kept label-dp's ownership and recorded epsilon 0.0;
    a class member is no code only as the class's ``Options``, a model whose every class above BaseModel is vflpriv's
    own."""
    for model in (_Zero, _ZeroBase):
        monkeypatch.setattr(model, "__module__", MODULE)
        monkeypatch.setattr(label_dp_module, model.__qualname__, model, raising=False)
    planted = {}
    for name, members in (("ZeroSpent", {"privacy_spent": _Zero}), ("ZeroOptions", {"Options": _Zero}),
                          ("ZeroBaseOptions", {"Options": _ZeroBase})):
        planted[name] = type(name, (LabelDP,), {"__module__": MODULE, **members})
        monkeypatch.setattr(label_dp_module, name, planted[name], raising=False)
        assert not vflpriv_own(planted[name]), name
    d = planted["ZeroSpent"].__new__(planted["ZeroSpent"])
    assert d.privacy_spent() == 0.0 and "ZeroSpent.privacy_spent" in foreign_accounting(d, "t-zero")
    assert vflpriv_own(LabelDP)


def test_a_plugin_naming_a_library_module_is_keyed_by_its_code(monkeypatch):
    """Review eps5 R8: a class whose ``__module__`` named torch was taken for a library's and got no code mark, so an
    edited plugin kept its keys (and resumed its old records)."""
    disguised = type("Plugged", (LabelDP,), {"__module__": "torch.plugged", "relabel": _clean})
    monkeypatch.setitem(DEFENSES._extra, "t-torch-named", disguised)
    assert "code" in code_mark(DEFENSES, "t-torch-named") and "code" not in code_mark(DEFENSES, "label-dp")
