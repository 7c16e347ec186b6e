"""Review l13: a plugin class's kept declarations are plain data, judged before any of their code runs (the run's key
ran a member's ``__getattr__`` and ``__repr__`` first, and that code made the class plain), without recursion (a
self-holding list crashed planning, a shared tuple hung it), and by exact types everywhere they are read."""

from __future__ import annotations

import math
import os
import pickle
import select
import signal
import time
import warnings
from collections.abc import Callable

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


def _within(seconds: float, walk: Callable[[], object]) -> object:
    """``walk()``'s result, computed in a forked child killed after ``seconds``: a walk regressing to unbounded work
    (keys.py before review l13 ran a 2^60-leaf tuple's repr, C code holding the GIL that no thread join or signal
    handler interrupts) fails the test in seconds instead of hanging the suite."""
    if not hasattr(os, "fork"):
        pytest.skip("bounding a walk that C code may hang needs os.fork (POSIX)")
    read, write = os.pipe()
    with warnings.catch_warnings():  # Python 3.12 warns of forking a process with threads: the child runs no torch
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the walk must not import or take a lock here: another thread may have held it at the fork
        try:
            try:
                result = ("returned", walk())
            except BaseException as exc:  # noqa: BLE001 - said in the parent's failure
                result = ("raised", f"{type(exc).__name__}: {exc}")
            with os.fdopen(write, "wb") as out:
                pickle.dump(result, out)
        finally:
            os._exit(0)  # the parent's cleanup (pytest's, torch's) is not the child's
    os.close(write)
    deadline, chunks = time.monotonic() + seconds, []
    while (left := deadline - time.monotonic()) > 0:  # drained as it comes: a result over the pipe's buffer is no hang
        if select.select([read], [], [], left)[0]:
            if not (chunk := os.read(read, 1 << 16)):
                break  # the child closed its end: all is read
            chunks.append(chunk)
    else:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read)
        pytest.fail(f"the walk did not return within {seconds:g} s (unbounded?)")
    os.close(read)
    os.waitpid(pid, 0)
    how, value = pickle.loads(b"".join(chunks))
    assert how == "returned", f"the walk raised {value}"
    return value


def test_a_walk_returning_more_than_a_pipe_holds_is_no_hang():
    """The helper reads the child's result while it waits (review misc F6: one over 64 KiB read as a hang)."""
    assert _within(5, lambda: "x" * 200_000) == "x" * 200_000


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

    deep: tuple = ()
    for _ in range(10**5):
        deep = (deep,)

    def walks() -> tuple[list[bool], float]:
        start = time.process_time()
        return [plain_data(v) for v in (loop, _nested(60), [0.5] * 10**7, deep)], time.process_time() - start

    found, seconds = _within(30, walks)
    assert found == [False] * 4 and seconds < 5  # each walk stops at its bounds
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
        voided, key = _within(30, lambda: (foreign_accounting(cls, "d"), loaded_code(cls)))
        assert "Odd.audit_strengths" in voided
        assert len(key) == 16  # keyed without reading the value


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


def test_a_constant_of_a_subclass_is_keyed_by_its_value_without_its_code():
    """Review l15 1: an IntEnum member, a numpy float or a named tuple as a plugin's constant was skipped by the key
    (stored results of another value reused); read by the built-in's own ``__repr__``, no code of theirs runs."""
    import collections
    import enum

    import numpy as np

    class Mode(enum.IntEnum):
        A = 1
        B = 2

    pair = collections.namedtuple("Pair", "x y")

    def keyed(value) -> str:
        return loaded_code(type("K", (GaussianDP,), {"reads_labels": False, "reads_features": False, "C": value}))

    for one, other in ((Mode.A, Mode.B), (np.float64(0.5), np.float64(0.7)), (pair(1, 2), pair(1, 3)), (0.5, 0.7)):
        assert keyed(one) != keyed(other) and keyed(one) == keyed(one)
