"""Review misc3 M2: an error naming a plugin's class reads the name without running the plugin's metaclass code, and
shows it on one bounded line, on each path that names one."""

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from vflpriv.attacks.search import search
from vflpriv.common.errors import ProtocolError
from vflpriv.defenses.own_modules import foreign_part, foreign_tensors
from vflpriv.engine.audit_guard import ReadGuard, rows_problem
from vflpriv.runner.feature_attacking import _reply
from vflpriv.workflows.describe import _uses

RAN: list[str] = []
SHOWN = "PLUGIN CODE RAN\nerror: fake " + "y" * 500


def _ran(attribute: str) -> property:
    return property(lambda cls: RAN.append(attribute) or SHOWN)


#: A plugin's metaclass whose classes' ``__name__`` and ``__module__`` are code, run each time they are read.
Meta = type("Meta", (type,), {"__name__": _ran("__name__"), "__module__": _ran("__module__")})
Evil = Meta("Evil", (), {"space": lambda self: {}, "untunable": ""})
EvilError = Meta("EvilError", (Exception,), {})
EvilModule = Meta("EvilModule", (nn.Module,), {})


class _Refused:
    """A method whose constructor raises a plugin's exception (describe's 'unknown (...)' line)."""

    Options = dict

    def __init__(self, options):
        raise EvilError()


def _raised(call) -> str:
    with pytest.raises(ProtocolError) as raised:
        call()
    return str(raised.value)


PATHS = {
    "audit_guard.rows_problem": lambda: rows_problem(Evil(), lambda grads: None, batch=4),
    "audit_guard.ReadGuard": lambda: _raised(lambda: ReadGuard(None).check(Evil(), Evil(), torch.arange(4))),
    "feature_attacking._reply": lambda: _raised(
        lambda: _reply(Evil(), SimpleNamespace(targets=("test",)), {}, "plugin", Evil())),
    "search.search": lambda: search(Evil(), None, budget=1, seed=0),
    "describe._uses": lambda: _uses(_Refused, "label_uses"),
    "own_modules.foreign_tensors": lambda: foreign_tensors(nn.Linear(2, 2), Evil()),
    "own_modules.foreign_part": lambda: foreign_part(nn.Sequential(nn.Linear(2, 2), EvilModule())),
}


@pytest.mark.parametrize("path", PATHS)
def test_a_plugin_class_is_named_without_its_metaclass_code_on_one_bounded_line(path):
    RAN.clear()
    said = PATHS[path]()
    assert RAN == [], f"the metaclass's {RAN[0]} ran"
    assert "Evil" in said and "\n" not in said and "y" * 20 not in said and len(said) < 400, said


class _Name(str):
    """A plugin's class name that is a str subclass: its methods are code, run each time they are called."""

    def __repr__(self, *args):
        RAN.append("__repr__")
        return SHOWN

    __str__ = __format__ = __getitem__ = __repr__


def test_a_class_named_by_a_str_subclass_is_named_without_its_methods():
    """``type()`` keeps a str subclass as ``__name__`` (and ``__qualname__``, ``__module__``): ``ascii()`` ran its
    ``__repr__``."""
    from vflpriv.common.errors import class_named, type_path

    RAN.clear()
    named = type(_Name("Evil"), (), {"__module__": _Name("plugin"), "__qualname__": _Name("Evil")})
    said = [class_named(named()), type_path(named), rows_problem(named(), lambda grads: None, batch=4)]
    assert RAN == [] and said[:2] == ["Evil", "plugin.Evil"] and "is Evil, not" in said[2], (RAN, said)


class _Failing(Exception):
    def __str__(self):
        raise RuntimeError("its __str__ broke")


class _Long(Exception):
    def __str__(self):
        return _Name("y" * 5000)


@pytest.mark.parametrize("raised", [_Failing, _Long])
def test_a_component_failing_to_start_is_one_bounded_error_whatever_its_exception_s_text(raised):
    """Review misc3 M2's last point: ``components.built`` formatted ``{exc}``: a failing ``__str__`` escaped as its
    RuntimeError (a traceback), a long one was whole, a str subclass's ``__format__`` ran."""
    from vflpriv.common.components import built
    from vflpriv.common.errors import ConfigError

    def make():
        raise raised()

    RAN.clear()
    with pytest.raises(ConfigError, match=f"^method 'p' failed to start: {raised.__name__}: ") as refused:
        built("method", "p", make)
    assert RAN == [] and len(str(refused.value)) < 400
