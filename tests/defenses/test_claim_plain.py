"""Review l13: a plugin class's kept declarations are plain data, judged before any of their code runs (the run's key
ran a member's ``__getattr__`` and ``__repr__`` first, and that code made the class plain), without recursion (a
self-holding list crashed planning, a shared tuple hung it), and by exact types everywhere they are read."""

from __future__ import annotations

import math
import time

import pytest

from vflpriv.common.declarations import plain_data
from vflpriv.common.errors import ConfigError
from vflpriv.config.keys import loaded_code
from vflpriv.config.registry import DEFENSES
from vflpriv.config.schema import RunConfig
from vflpriv.defenses.declarations import declared_secrets
from vflpriv.defenses.dp_gaussian import GaussianDP
from vflpriv.runner.claims import foreign_accounting
from vflpriv.runner.execution import run


def _config(name: str) -> RunConfig:
    return RunConfig.model_validate({
        "partition": {"labeled": 100, "aux": 40}, "model": {"hidden": 32, "out_dim": 16},
        "finetune": {"epochs": 1, "batch_size": 32}, "attack": {"name": "mc", "prior": "none"},
        "defenses": [{"name": name, "strength": 64.0, "sweep": True}]})


def test_a_member_s_code_cannot_clean_its_class_before_the_first_look(monkeypatch):
    """Review l13 1: keying the run read ``__func__`` off every member, so this ``__getattr__`` deleted its member."""

    class Vanishing:
        def __getattr__(self, name):  # abc asks for __isabstractmethod__ as the class is made: import-time code
            if name != "__isabstractmethod__" and vars(GetattrDP).get("extra") is self:
                delattr(GetattrDP, "extra")
            raise AttributeError(name)

    class GetattrDP(GaussianDP):
        reads_labels = reads_features = False
        extra = Vanishing()

    monkeypatch.setitem(DEFENSES._extra, "t-getattr", GetattrDP)
    (record,) = run(_config("t-getattr"))
    assert record.status == "ok" and math.isnan(record.epsilon) and "GetattrDP.extra" in record.notes


def _nested(levels: int) -> tuple:
    x = (0.5,)
    for _ in range(levels):
        x = (x, x)
    return x


def test_plain_data_is_bounded_and_exact():
    loop: list = []
    loop.append(loop)

    class F(float):
        pass

    start = time.process_time()
    assert not plain_data(loop) and not plain_data(_nested(60)) and not plain_data([0.5] * 10**7)
    deep: tuple = ()
    for _ in range(10**5):
        deep = (deep,)
    assert not plain_data(deep)
    assert time.process_time() - start < 5  # each walk stops at its bounds
    nested = type("Nested", (GaussianDP,), {"reads_labels": False, "reads_features": False,
                                            "audit_strengths": {"finetune": (0.5, F(1.0))}})
    assert "Nested.audit_strengths" in foreign_accounting(nested, "d")
    assert not plain_data({"finetune": (0.5, F(1.0))}) and not plain_data({"a": [str.__new__(type("S", (str,), {}))]})
    assert plain_data({"finetune": (0.5, 1.0, 2)}) and plain_data((True, None, "x", frozenset({1}), {"k": (1,)}))


def test_declarations_too_large_or_self_holding_void_the_claim_without_a_traceback():
    loop: list = []
    loop.append(loop)
    for value in (loop, _nested(60)):
        cls = type("Odd", (GaussianDP,), {"reads_labels": False, "reads_features": False, "audit_strengths": value})
        assert "Odd.audit_strengths" in foreign_accounting(cls, "d")
        assert len(loaded_code(cls)) == 16  # keyed without reading the value


class _Secrets(frozenset):
    compared = 0

    def __le__(self, other):
        type(self).compared += 1
        return super().__le__(other)


class _Name(str):
    def __hash__(self):
        return str.__hash__(self)


def test_secrets_and_python_s_name_lists_are_read_by_exact_type():
    cls = type("S", (GaussianDP,), {"secrets": _Secrets({"labels"})})
    with pytest.raises(ConfigError, match="its secrets are a _Secrets"):
        declared_secrets(cls)
    assert _Secrets.compared == 0
    named = type("N", (GaussianDP,), {"reads_labels": False, "reads_features": False, "__slotnames__": [_Name("x")]})
    assert "N.__slotnames__" in foreign_accounting(named, "d")
