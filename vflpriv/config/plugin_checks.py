"""What an attack's or a defense's class declares, checked once where the registry resolves or registers it (review
hunt2 N2-N7): a declaration that planning, ``describe`` or the audit reads later failed there with a traceback, after
training, or with a message naming nothing. Each check returns the problem with the valid choices, or None.

Like the registry, they import no component package (the components import the configuration): the names they
check against are ``vflpriv.common``'s, a base class is known by its qualified name."""

from __future__ import annotations

import math
import numbers
from typing import Any

from vflpriv.common.declarations import plain_data
from vflpriv.common.errors import class_named
from vflpriv.common.points import KNOWN_POINTS, PER_SAMPLE
from vflpriv.common.secret_kinds import FEATURES, SECRETS

FEATURE_ATTACK = "vflpriv.attacks.features.base.FeatureAttack"
STRENGTH_AXIS = "vflpriv.defenses.base.StrengthAxis"
ROLES = ("active", "passive", "server")
#: The phases a defense may act in (a passive defense's ``phases``, an audit's strengths per phase).
PHASES = ("pretrain", "finetune")


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
    secret, roles = cls.secret, cls.roles
    if type(secret) is not str or secret not in SECRETS:
        return f"its secret is {shown(secret, 40)}; an attack infers {' or '.join(map(repr, SECRETS))}"
    if type(roles) not in (set, frozenset, tuple, list) or not roles or not all(type(r) is str and r in ROLES
                                                                                 for r in roles):
        return f"its roles are {shown(roles)}; they must be some of {_names(ROLES)}"
    feature = _derives(cls, FEATURE_ATTACK)
    if secret == FEATURES and not feature:
        return f"it infers features but is not a FeatureAttack (subclass {FEATURE_ATTACK})"
    if feature and secret != FEATURES:
        return (f"it is a FeatureAttack but its secret is {secret!r}; a FeatureAttack infers 'features' (a label "
                "attack subclasses vflpriv.attacks.base.Attack)")
    return _observes_problem(cls.observes) if feature else None


def _observes_problem(observes: object) -> str | None:
    if type(observes) is not tuple or not observes or not all(type(k) is str and k in PER_SAMPLE for k in observes) \
            or len(set(observes)) < len(observes):
        return (f"its observes is {shown(observes)}; give a tuple of the per-sample messages it reconstructs from, "
                f"some of {_names(PER_SAMPLE)} without repeats")
    return None


def defense_problem(cls: type) -> str | None:
    """A defense class whose axis, audit strengths, hook points and phases are ones planning can use (its
    ``secrets``: ``defenses.declarations.declared_secrets``, where planning and ``describe`` read them)."""
    axis = cls.axis
    if not _derives(type(axis), STRENGTH_AXIS):
        return f"its axis is {shown(axis)}; give a {STRENGTH_AXIS}"
    if problem := _axis_problem(axis):
        return f"its axis {problem}"
    points = cls.hook_points
    if type(points) not in (set, frozenset) or not points or not all(type(p) is str and p in KNOWN_POINTS
                                                                      for p in points):
        return f"its hook_points are {shown(points)}; give a non-empty set of some of {_names(sorted(KNOWN_POINTS))}"
    phases = getattr(cls, "phases", PHASES)
    if type(phases) is not tuple or not phases or not all(type(p) is str and p in PHASES for p in phases):
        return f"its phases are {shown(phases)}; give a tuple of some of {_names(PHASES)}"
    for name in ("audit_strengths", "embedding_audit_strengths"):
        problem = _strengths_problem(getattr(cls, name), axis)
        if problem:
            return f"its {name} {problem}"
    return None


def _number(value: object) -> bool:
    """A real number (numpy's too), not NaN; bool is no strength."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and not math.isnan(value)


def _axis_problem(axis: Any) -> str:
    """What is wrong with a strength axis's own fields ('' if nothing): the checks after it format and compare them
    (a ``low`` of None crashed planning with a traceback: review misc F8)."""
    if type(axis.name) is not str or not axis.name:
        return f"name is {shown(axis.name)}; give a non-empty str"
    if axis.stronger not in ("higher", "lower") or type(axis.stronger) is not str:
        return f"{axis.name}: stronger is {shown(axis.stronger)}; give 'higher' or 'lower'"
    for field in ("identity", "low", "high"):
        if not _number(getattr(axis, field)):
            return f"{axis.name}: {field} is {shown(getattr(axis, field))}; give a real number, not NaN"
    if not axis.low <= axis.high:
        return f"{axis.name}: low ({axis.low:g}) is above high ({axis.high:g}); give low <= high"
    search, log = axis.search, axis.log
    if type(log) is not bool:
        return f"{axis.name}: log is {shown(log)}; give True or False"
    if not (type(search) is tuple and len(search) == 2 and all(_number(v) and math.isfinite(v) for v in search)
            and search[0] < search[1] and (not log or search[0] > 0)):  # tune refuses one outside [low, high]
        return (f"{axis.name}: search is {shown(search)}; give a tuple (lo, hi) of finite numbers with lo < hi"
                + (", lo > 0 (a log scale)" if log else ""))
    return ""


def _strengths_problem(strengths: object, axis: Any) -> str:
    """What is wrong with an audit's strengths per phase on ``axis`` ('' if nothing)."""
    valid = (f"give a dict from some of {_names(PHASES)} to a non-empty tuple of distinct finite strengths in "
             f"[{axis.low:g}, {axis.high:g}] (its axis {axis.name})")
    if type(strengths) is not dict:
        return f"are {shown(strengths)}; {valid}"
    for phase, values in strengths.items():
        if phase not in PHASES:
            return f"name the phase {shown(phase)}; {valid}"
        fine = type(values) is tuple and values and all(_number(v) and math.isfinite(v) and axis.low <= v <= axis.high
                                                         for v in values)
        if not fine or len(set(values)) < len(values):
            return f"hold {shown(values)} for {phase}; {valid}"
    return ""
