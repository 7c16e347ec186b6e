"""What an attack's or a defense's class declares, checked once where the registry resolves or registers it (review
hunt2 N2-N7): a declaration that planning, ``describe`` or the audit reads later failed there with a traceback, after
training, or with a message naming nothing. Each check returns the problem with the valid choices, or None.

Like the registry, they import no component package (the components import the configuration): the names they
check against are ``vflpriv.common``'s, a base class is known by its qualified name."""

from __future__ import annotations

import functools
import inspect
import math
import sys
from typing import Any

from vflpriv.common.declarations import CONTAINERS, one_of, plain_data
from vflpriv.common.errors import class_named, exception_text
from vflpriv.common.points import KNOWN_POINTS, PER_SAMPLE
from vflpriv.common.secret_kinds import FEATURES, SECRETS

FEATURE_ATTACK = "vflpriv.attacks.features.base.FeatureAttack"
STRENGTH_AXIS = "vflpriv.defenses.base.StrengthAxis"
ROLES = ("active", "passive", "server")
#: The phases a defense may act in (a passive defense's ``phases``, an audit's strengths per phase).
PHASES = ("pretrain", "finetune")
#: The most audit strengths a defense declares per phase: an audit trains every one of them per seed and attack (a
#: plugin's 2,000,000 passed, and a dry-run audit of them took 111 s and 2.6 GB: review hunt3 P10).
MAX_AUDIT_STRENGTHS = 16


def shown(value: object, width: int = 60) -> str:
    """``value``'s repr where it is plain data (running none of its code), else its type's name."""
    return repr(value)[:width] if plain_data(value) else f"a {class_named(value)}"


def _names(values) -> str:
    return ", ".join(map(repr, values))


def _derives(cls: type, base: str) -> bool:
    """Whether ``cls`` is ``base`` (module.Class) or a subclass of it."""
    return base in (f"{k.__module__}.{k.__qualname__}" for k in cls.__mro__)


def attack_problem(cls: type) -> str | None:
    """An attack class that infers a secret vflpriv scores and names roles that exist; a feature attack (and only
    one) is a FeatureAttack, reading per-sample messages it names."""
    try:
        return _attack_problem(cls)
    except _Refused as exc:
        return str(exc)


def _attack_problem(cls: type) -> str | None:
    secret_valid = f"an attack infers {' or '.join(map(repr, SECRETS))}"
    secret = _read(cls, "secret", "its secret", secret_valid)
    if type(secret) is not str or secret not in SECRETS:
        return f"its secret is {shown(secret, 40)}; {secret_valid}"
    roles_valid = f"they must be some of {_names(ROLES)}"
    roles = _read(cls, "roles", "its roles", roles_valid)
    if not one_of(type(roles), CONTAINERS) or not roles or not all(type(r) is str and r in ROLES for r in roles):
        return f"its roles are {shown(roles)}; {roles_valid}"
    feature = _derives(cls, FEATURE_ATTACK)
    if secret == FEATURES and not feature:
        return f"it infers features but is not a FeatureAttack (subclass {FEATURE_ATTACK})"
    if feature and secret != FEATURES:
        return (f"it is a FeatureAttack but its secret is {secret!r}; a FeatureAttack infers 'features' (a label "
                "attack subclasses vflpriv.attacks.base.Attack)")
    for flag in ("needs_encoder", "binary_only"):
        if problem := _flag_problem(cls, flag):
            return problem
    valid = "give a method (phase) -> the messages it reads"
    if not callable(messages := _read(cls, "required_messages", "its required_messages", valid)):
        return f"its required_messages is {shown(messages)}; {valid}"
    return _observes_problem(cls) if feature else None


def _flag_problem(cls: type, name: str) -> str | None:
    """A declared flag that is exactly a bool, read once (a ``__bool__`` of its own ran, a string read as True): the
    effective value and each class's own one, as ``declarations.declared_read`` reads them (review hunt3 P13)."""
    own = (vars(k).get(name, _ABSENT) for k in cls.__mro__)
    for value in (_read(cls, name, f"its {name}", "give True or False"), *own):
        if value is not _ABSENT and type(value) is not bool:
            return f"its {name} is {shown(value)}; give True or False"
    return None


def _observes_problem(cls: type) -> str | None:
    valid = (f"give a tuple of the per-sample messages it reconstructs from, some of {_names(PER_SAMPLE)} without "
             "repeats")
    observes = _read(cls, "observes", "its observes", valid)
    if type(observes) is not tuple or not observes or not all(type(k) is str and k in PER_SAMPLE for k in observes) \
            or len(set(observes)) < len(observes):
        return f"its observes is {shown(observes)}; {valid}"
    return None


def defense_problem(cls: type) -> str | None:
    """A defense class whose axis, audit strengths, hook points and phases are ones planning can use (its
    ``secrets``: ``defenses.declarations.declared_secrets``, where planning and ``describe`` read them)."""
    try:
        return _defense_problem(cls)
    except _Refused as exc:
        return str(exc)


def _defense_problem(cls: type) -> str | None:
    axis = _read(cls, "axis", "its axis", f"give a {STRENGTH_AXIS}")
    if not _derives(type(axis), STRENGTH_AXIS):
        return f"its axis is {shown(axis)}; give a {STRENGTH_AXIS}"
    name, low, high = _checked_axis(axis)
    for flag in ("reads_labels", "reads_features", "binary_only"):
        if problem := _flag_problem(cls, flag):
            return problem
    valid = f"give a non-empty set of some of {_names(sorted(KNOWN_POINTS))}"
    points = _read(cls, "hook_points", "its hook_points", valid)
    if not one_of(type(points), (set, frozenset)) or not points or not all(type(p) is str and p in KNOWN_POINTS
                                                                            for p in points):
        return f"its hook_points are {shown(points)}; {valid}"
    valid = f"give a tuple of some of {_names(PHASES)}"
    phases = _read(cls, "phases", "its phases", valid, default=PHASES)
    if type(phases) is not tuple or not phases or not all(type(p) is str and p in PHASES for p in phases):
        return f"its phases are {shown(phases)}; {valid}"
    valid = (f"give a dict from some of {_names(PHASES)} to a non-empty tuple of distinct finite strengths in "
             f"[{low:g}, {high:g}] (its axis {name})")
    for field in ("audit_strengths", "embedding_audit_strengths"):
        if problem := _strengths_problem(_read(cls, field, f"its {field}", valid), low, high, valid):
            return f"its {field} {problem}"
    return None


def members_problem(cls: type, members: tuple[str, ...], base: str) -> str | None:
    """The members the registry found by lookup alone, each read once: a metaclass property that raises was found
    there and escaped later, in ``describe`` or planning, with a traceback (review decl's leftover)."""
    try:
        for member in members:
            _read(cls, member, f"its {member}", f"define it as {base} does (docs/plugins.md)")
    except _Refused as exc:
        return str(exc)
    return None


class _Refused(Exception):
    """A declaration refused where it was read (its own code raised, or an axis field is unfit): the problem, with
    the valid choices."""


_ABSENT = object()


def _read(owner: object, name: str, label: str, valid: str, default: object = _ABSENT) -> Any:
    """``owner.name``, read once: a plugin's property (or its metaclass's) may raise anything, refused as ``label``
    that could not be read, then ``valid``; ``default`` only where nothing defines ``name`` (read without its code)."""
    if default is not _ABSENT and inspect.getattr_static(owner, name, _ABSENT) is _ABSENT:
        return default
    try:
        return getattr(owner, name)
    except Exception as exc:  # noqa: BLE001 - a plugin's own code
        raise _Refused(f"{label} could not be read ({class_named(exc)}: {exception_text(exc)}); {valid}") from exc


def _number(value: object) -> bool:
    """A real number of an exact type (int, float, numpy's), not NaN: an arbitrary ``numbers.Real`` runs its own
    code where it is compared or converted; bool is no strength."""
    numpy = sys.modules.get("numpy")  # a value of numpy's types has it imported; the command line imports it late
    return one_of(type(value), (int, float, *(_numpy_reals(numpy) if numpy else ()))) and not math.isnan(value)


@functools.cache
def _numpy_reals(numpy: Any) -> tuple[type, ...]:
    """numpy's real scalar types, exactly (bool's excluded): a subclass's ``__float__`` or ``__eq__`` is a plugin's."""
    return tuple({numpy.dtype(code).type for code in numpy.typecodes["AllInteger"] + numpy.typecodes["Float"]})


def _checked_axis(axis: Any) -> tuple[str, Any, Any]:
    """A strength axis's name, low and high, each of its fields read once and checked (refused otherwise): the
    checks after it format and compare them (a ``low`` of None crashed planning with a traceback: review misc F8)."""
    name = _read(axis, "name", "its axis name", "give a non-empty str")
    if type(name) is not str or not name:
        raise _Refused(f"its axis name is {shown(name)}; give a non-empty str")
    valid = "give 'higher' or 'lower'"
    stronger = _read(axis, "stronger", f"its axis {name}: stronger", valid)
    if type(stronger) is not str or stronger not in ("higher", "lower"):
        raise _Refused(f"its axis {name}: stronger is {shown(stronger)}; {valid}")
    valid = "give an int or a float (numpy's too), not NaN"
    read = {field: _read(axis, field, f"its axis {name}: {field}", valid) for field in ("identity", "low", "high")}
    for field, value in read.items():
        if not _number(value):
            raise _Refused(f"its axis {name}: {field} is {shown(value)}; {valid}")
    low, high = read["low"], read["high"]
    if not low <= high:
        raise _Refused(f"its axis {name}: low ({low:g}) is above high ({high:g}); give low <= high")
    log = _read(axis, "log", f"its axis {name}: log", "give True or False")
    if type(log) is not bool:
        raise _Refused(f"its axis {name}: log is {shown(log)}; give True or False")
    valid = "give a tuple (lo, hi) of finite numbers with lo < hi" + (", lo > 0 (a log scale)" if log else "")
    search = _read(axis, "search", f"its axis {name}: search", valid)
    if not (type(search) is tuple and len(search) == 2 and all(_number(v) and math.isfinite(v) for v in search)
            and search[0] < search[1] and (not log or search[0] > 0)):  # tune refuses one outside [low, high]
        raise _Refused(f"its axis {name}: search is {shown(search)}; {valid}")
    return name, low, high


def _strengths_problem(strengths: object, low: Any, high: Any, valid: str) -> str:
    """What is wrong with an audit's strengths per phase on an axis from ``low`` to ``high`` ('' if nothing)."""
    if type(strengths) is not dict:
        return f"are {shown(strengths)}; {valid}"
    for phase, values in strengths.items():
        if type(phase) is not str or phase not in PHASES:
            return f"name the phase {shown(phase)}; {valid}"
        if type(values) is tuple and len(values) > MAX_AUDIT_STRENGTHS:  # before any per-value work
            return f"hold {len(values)} strengths for {phase}; give at most {MAX_AUDIT_STRENGTHS}"
        fine = type(values) is tuple and values and all(_number(v) and math.isfinite(v) and low <= v <= high
                                                         for v in values)
        if not fine or len(set(values)) < len(values):
            return f"hold {shown(values)} for {phase}; {valid}"
    return ""
