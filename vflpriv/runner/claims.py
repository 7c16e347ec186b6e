"""What a run records of its defenses' privacy claims: which defenses' epsilons are vflpriv's own computation
(:func:`foreign_accounting`), under which secret (:func:`claim_secrets`), and the label and feature epsilons a record
holds (:func:`claimed`, :func:`record_claims`), with the notes where none is recorded."""

from __future__ import annotations

import abc
import types

from vflpriv.common.declarations import assigned_since, vflpriv_own
from vflpriv.defenses.base import Protection
from vflpriv.defenses.declarations import declared_secrets
from vflpriv.engine import FINETUNE


#: What computes a DP defense's epsilon, counts its uses and says where and for whom it holds: a callable of these
#: names in the instance is not vflpriv's code (a plugin's class may define nothing outside :data:`CLAIM_KEEPING`).
ACCOUNTING = ("privacy_spent", "privacy_delta", "covers", "covers_data", "claimed_epsilon", "uses", "steps",
              "releases", "guards", "_released", "acts_for", "notes", "bind", "passive_backward", "backward",
              "backpropagates", "rows_checked", "misread", "unchecked_foreign", "_foreign", "dp_sgd",
              "passive_backpropagates")

#: What a class that is not vflpriv's own may define beside a vflpriv defense's accounting and keep its epsilon, each
#: as plain data (no function, property or other descriptor: review l10 1): declarations that run no code and change
#: neither the mechanism nor its count (``secrets`` only narrow them: :func:`claim_secrets`; a declared read only adds
#: to the classes' above: ``Protection.label_reads``). Any other member (a method, a property, an options model, a
#: strength axis) makes the epsilon its author's word: listing the members that decide a count missed some every time
#: (reviews l8 L8-2, l9 L9-2: ``rows_checked``, dp-gaussian's ``backward``).
CLAIM_KEEPING = frozenset({"secrets", "reads_labels", "reads_features", "anchor", "pays", "cost", "revision",
                           "audit_strengths", "embedding_audit_strengths", "binary_only"})

#: What Python puts in a class of its own accord, and of which exact type each must be: a property under such a name
#: ran plugin code whenever it was read (``__dict__``: review l11 1).
_PYTHON_MEMBERS: dict[str, tuple[type, ...]] = {
    "__module__": (str,), "__qualname__": (str,), "__doc__": (str, type(None)),
    "__dict__": (types.GetSetDescriptorType,), "__weakref__": (types.GetSetDescriptorType,),
    "__annotations__": (dict,), "__abstractmethods__": (frozenset,),
    "_abc_impl": (type(vars(Protection)["_abc_impl"]),), "__firstlineno__": (int,), "__static_attributes__": (tuple,),
    "__slotnames__": (list,)}


def foreign_accounting(d: Protection | type, name: str) -> str:
    """Why a claiming defense's epsilon is not vflpriv's computation, or '': a vflpriv class of its MRO whose members
    were assigned since vflpriv defined it (review eps6 E4); a class of its MRO outside the accounting class's line
    (neither its base nor its subclass: another defense's mechanism mixed in, vflpriv's own too: review l10 4), or not
    vflpriv's own and defining anything but :data:`CLAIM_KEEPING` data, or a metaclass not vflpriv's; the instance
    holding a callable in place of a class member or an :data:`ACCOUNTING` one, whatever the code declares it reads
    (reviews final14 F8, l9 L9-2, l10 1). ``d`` a class: judged before any of its code ran (planning's first look)."""
    cls = d if isinstance(d, type) else type(d)
    if cls.privacy_spent is Protection.privacy_spent:  # it claims nothing
        return ""
    line = accounting_class(cls)
    classes = [k for k in cls.__mro__ if k not in _PYTHONS]
    found = [f"{data} (assigned since vflpriv defined it)" for k in classes for data in assigned_since(k)]
    found += [f"{k.__name__} (mixed in beside {line.__name__}'s accounting)" for k in classes
              if not issubclass(line, k) and not issubclass(k, line)]
    found += [f"{k.__name__}.{member}" for k in (*classes, *type(cls).__mro__)
              if k not in _PYTHONS and not vflpriv_own(k) and not assigned_since(k)
              for member, value in sorted(vars(k).items()) if _foreign_member(k, member, value)]
    own = {} if d is cls else getattr(d, "__dict__", {})
    found += [f"self.{member}" for member, value in own.items()
              if callable(value) and (member in ACCOUNTING or hasattr(type(d), member))]
    listed = ", ".join(dict.fromkeys(found[:6])) + f" and {len(found) - 6} more" * (len(found) > 6)
    return (f"{name}: its class holds what vflpriv's own code does not ({listed}) beside vflpriv's accounting, so the "
            "epsilon it reports is its author's word, not a bound vflpriv computed") if found else ""


def _foreign_member(k: type, member: str, value: object) -> bool:
    """Whether a member of class ``k`` (not vflpriv's own) voids the claim: anything but Python's own (of its exact
    type; a slot descriptor of ``k`` itself: review l12 4) and declared plain data."""
    if member in _PYTHON_MEMBERS:  # exactly: a subclass of str may be a descriptor
        return type(value) not in _PYTHON_MEMBERS[member] or getattr(value, "__objclass__", k) is not k
    return member not in CLAIM_KEEPING or not _plain(value)


def _plain(value: object) -> bool:
    """Whether ``value`` is plain data, of Python's exact built-in types all the way down: a frozenset subclass under
    ``secrets`` ran plugin code whenever it was read (review l12 1)."""
    if type(value) in (str, bool, int, float, type(None)):
        return True
    if type(value) in (tuple, list, set, frozenset):
        return all(map(_plain, value))
    return type(value) is dict and all(_plain(key) and _plain(item) for key, item in value.items())


#: Python's own classes in a defense's MRO and its metaclass's.
_PYTHONS = frozenset({object, type, abc.ABC, abc.ABCMeta})

def claim_secrets(d: Protection) -> frozenset[str]:
    """The secrets ``d``'s epsilon is recorded under: those of the class computing it (defining ``privacy_spent``; if
    not vflpriv's own, :func:`foreign_accounting` records nothing) narrowed to ``d``'s: a plugin's ``secrets`` may
    narrow them, never redirect them (an embedding-dp subclass naming the labels: review l6 L1)."""
    return declared_secrets(accounting_class(d)) & declared_secrets(d)


def accounting_class(d: Protection | type) -> type:
    """The class whose ``privacy_spent`` computes the epsilon of ``d`` (a defense or its class)."""
    return next(k for k in (d if isinstance(d, type) else type(d)).__mro__ if "privacy_spent" in vars(k))


def claimed(defenses: list[Protection], verdicts: tuple[str, ...] = ()
            ) -> tuple[list[tuple[float, float]], list[tuple[Protection, float]], list[str]]:
    """What a run records of its defenses' claims (:func:`claim_secrets`): (epsilon, delta) of each covered one claiming
    the labels alone, (defense, epsilon) of those claiming the features, and :func:`_unrecorded`'s notes; ``verdicts``:
    the planner's (``Plan.verdicts``)."""
    spent = [(d, e, claim_secrets(d)) for d, planned in zip(defenses, _padded(verdicts, defenses))
             if not _uncovered(d, planned) and (e := d.privacy_spent()) is not None]
    labels = [(e, d.privacy_delta()) for d, e, secrets in spent if secrets == {"labels"}]
    features = [(d, e) for d, e, secrets in spent if "features" in secrets]
    return labels, features, [note for d, _, secrets in spent if (note := _unrecorded(d, secrets))]


def _unrecorded(d: Protection, secrets: frozenset[str]) -> str:
    """Why ``d``'s epsilon is not recorded under the secrets it names (``secrets``: :func:`claim_secrets`), or ''."""
    if secrets == {"labels", "features"}:  # the run's note on the feature epsilon alone said nothing of the labels
        return (f"{d.name}: no label epsilon recorded: it claims the labels and the features with one epsilon, "
                "recorded as the feature epsilon only, where it guards the record's victim")
    if secrets:
        return ""
    named = declared_secrets(d)
    if not named:
        return f"{d.name}: no epsilon recorded: its secrets name neither labels nor features"
    k = accounting_class(d)
    return (f"{d.name}: no epsilon recorded: its secrets ({', '.join(sorted(named))}) are none of those its accounting "
            f"({k.__name__}.privacy_spent()) bounds ({', '.join(sorted(declared_secrets(k))) or 'none'}): a plugin's "
            "secrets may narrow them, never redirect them")


def withheld(defenses: list[Protection], names: list[str], unrecorded: list[str],
             verdicts: tuple[str, ...] = ()) -> list[str]:
    """The notes of the claims a run records no (label) epsilon for: :func:`claimed`'s, and those uncovered."""
    return unrecorded + [f"{name}: no epsilon recorded: {why}"
                         for d, name, planned in zip(defenses, names, _padded(verdicts, defenses))
                         if (why := _uncovered(d, planned)) and not d.is_identity]


def _padded(verdicts: tuple[str, ...], defenses: list) -> tuple[str, ...]:
    """The planner's verdicts, one per defense ('' where none was given)."""
    return (*verdicts, *[""] * (len(defenses) - len(verdicts)))


def _uncovered(d: Protection, planned: str) -> str:
    """Why ``d``'s claim does not hold: as planned (``Plan.verdicts``: code that cleared ``uncovered`` and deleted
    itself, review l10 2), as its mechanism found while it ran (``uncovered``), or judged again when the run is recorded
    (a plugin's code clearing ``uncovered``: review l9 L9-1)."""
    return planned or d.uncovered or foreign_accounting(d, d.name)


def record_claims(record, claims: list[tuple[float, float]], features: list[tuple[Protection, float]]) -> list[str]:
    """Writes a run's claims (:func:`claimed`) into ``record``: the label epsilon and delta (several compose by basic
    composition: they add), the feature epsilon of those guarding its victim's finetuning features; returns the note
    where the feature claims guard another party only (review final14 F7: one function, pinned)."""
    record.epsilon = sum(e for e, _ in claims) if claims else float("nan")
    record.epsilon_delta = sum(d for _, d in claims) if claims else float("nan")
    guarding = [(e, d.privacy_delta()) for d, e in features if _guards(d, record.victim)]
    if guarding:
        record.epsilon_features = sum(e for e, _ in guarding)
        record.epsilon_features_delta = sum(d for _, d in guarding)
    if not features or guarding:
        return []
    return [f"no feature epsilon at victim {record.victim}: the feature DP defenses guard other parties' features"
            if record.victim != "" else "a label attack: the feature epsilon does not apply"]


def _guards(defense, victim: str) -> bool:
    """Whether ``defense`` guards the finetuning features of the record's ``victim`` ("" for none)."""
    return victim.isdigit() and bool(getattr(defense, "guards", lambda *_: False)(int(victim), FINETUNE))
