"""What a run records of its defenses' privacy claims: which defenses' epsilons are vflpriv's own computation
(:func:`foreign_accounting`), under which secret (:func:`claim_secrets`), and the label and feature epsilons a record
holds (:func:`judged` once, :func:`record_claims`), with the notes where none is recorded."""

from __future__ import annotations

import abc
import math
import types
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from vflpriv.common.declarations import (
    CONTAINERS,
    SCALARS,
    assigned_since,
    in_vflpriv,
    one_of,
    options_model,
    plain_data,
    vflpriv_own,
)
from vflpriv.common.errors import class_named, type_named
from vflpriv.common.secret_kinds import FEATURES, LABELS
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


#: Python's own members that hold names, each an exact ``str`` (``__annotations__``: its keys).
_NAMES = frozenset({"__slotnames__", "__static_attributes__"})


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
    found += [f"{type_named(k)} (mixed in beside {type_named(line)}'s accounting)" for k in classes
              if not issubclass(line, k) and not issubclass(k, line)]
    found += [f"{type_named(k)}.{ascii(member)[1:-1][:60]}" for k in (*classes, *type(cls).__mro__)
              if k not in _PYTHONS and not vflpriv_own(k) and not assigned_since(k)
              for member, value in sorted(vars(k).items()) if _foreign_member(k, member, value)]
    own = {} if d is cls else getattr(d, "__dict__", {})
    found += [f"self.{member}" for member, value in own.items()
              if callable(value) and (member in ACCOUNTING or hasattr(type(d), member))]
    return _holds(name, found, "its class holds what vflpriv's own code does not")


def _holds(name: str, found: list[str], what: str) -> str:
    """The note voiding ``name``'s claim for what ``found`` names (the first six, each once), or '' if it is empty."""
    found = list(dict.fromkeys(found))
    listed = ", ".join(found[:6]) + f" and {len(found) - 6} more" * (len(found) > 6)
    return (f"{name}: {what} ({listed}) beside vflpriv's accounting, so the epsilon it reports is its author's word, "
            "not a bound vflpriv computed") if found else ""


def _foreign_member(k: type, member: str, value: object) -> bool:
    """Whether a member of class ``k`` (not vflpriv's own) voids the claim: anything but Python's own (of its exact
    type; a slot descriptor of ``k`` itself: review l12 4) and declared plain data."""
    if member in _PYTHON_MEMBERS:  # exactly: a subclass of str may be a descriptor
        if not one_of(type(value), _PYTHON_MEMBERS[member]) or getattr(value, "__objclass__", k) is not k:
            return True
        names = value.keys() if type(value) is dict else value if member in _NAMES else ()
        return not all(type(name) is str for name in names)  # copy and pickle hash ``__slotnames__``'s (review l13 4)
    return member not in CLAIM_KEEPING or not plain_data(value)


#: What torch makes of a defense's state (exact types: a subclass may run code), and its own storage in every module.
_TORCH_STATE = (torch.Tensor, nn.Parameter, torch.Generator, torch.device, torch.dtype, torch.Size)
_MODULE_STORAGE = frozenset(vars(nn.Module()))
_DEPTH, _ITEMS = 64, 10_000


def made_types(d: Protection) -> dict[str, tuple[type, object]]:
    """Each of ``d``'s data as its construction left it, (type, the object itself where it is no scalar): the
    planner's snapshot, before any other plugin's code of the training runs (:func:`altered` compares)."""
    return {member: (type(value), None if one_of(type(value), SCALARS) else value) for member, value in vars(d).items()}


def altered(d: Protection, made: dict[str, tuple[type, object]]) -> str:
    """Why a claiming ``d``'s data is not what vflpriv's code makes of it, or '': data its construction set (``made``:
    :func:`made_types`) deleted, of another type (a ``None`` set for later may become state) or another object (a
    generator, the options: review l14 2); data of the instance, all the way down, not plain data, torch's exact state
    types, vflpriv's own object or code, or (where a vflpriv class declares ``HOLDS_MODELS``) a model; options not
    plain data (review l14 1): another plugin of the training making dp-gaussian's ``sigma`` a float subclass that
    zeroes the noise kept the epsilon (review l12 2)."""
    if type(d).privacy_spent is Protection.privacy_spent:  # it claims nothing
        return ""
    own = getattr(d, "__dict__", {})
    changed = {member for member, value in own.items() if member in made and made[member][0] is not type(None)
               and (type(value) is not made[member][0] or made[member][1] is not None and value is not made[member][1])}
    found = [f"self.{member} (deleted)" for member in made if member not in own]
    found += [f"self.{member} (a {class_named(own[member])}, made a {type_named(made[member][0])})"
              if type(own[member]) is not made[member][0] else f"self.{member} (replaced)" for member in changed]
    found += [f"self.{member}{path}" for member, value in own.items() if member not in changed
              for path in _unmade(value, set())]
    return _holds(d.name, found, "its data holds what vflpriv's own code did not put there")


def tampered(d: Protection, made: dict[str, tuple[type, object]]) -> str:
    """Why ``d``'s code or data, judged when the run is recorded, voids its claim (:func:`foreign_accounting`,
    :func:`altered`), or '': its own notes' claims (embedding-dp's test rows) are left out then (review l14 3)."""
    return foreign_accounting(d, d.name) or altered(d, made)


def _unmade(value: object, seen: set[int], depth: int = 0, models: bool = False) -> list[str]:
    """Where under ``value`` lies data vflpriv's code does not make (paths, '' for ``value`` itself): see
    :func:`altered`; each object walked once, at most :data:`_DEPTH` levels down and :data:`_ITEMS` items a container;
    ``models``: within a vflpriv class declaring ``HOLDS_MODELS``, where a module (a model, whose rows the mechanism
    checks) may lie."""
    kind = type(value)
    if one_of(kind, SCALARS) or one_of(kind, _TORCH_STATE) or id(value) in seen:
        return []
    if depth > _DEPTH or (one_of(kind, CONTAINERS) or kind is dict) and len(value) > _ITEMS:
        return [f" (a {type_named(kind)} over {_DEPTH} deep or of over {_ITEMS} items)"]
    seen.add(id(value))
    depth += 1
    if one_of(kind, CONTAINERS):
        return [f"[{i}]{path}" for i, item in enumerate(value) for path in _unmade(item, seen, depth, models)]
    if kind is dict:
        return [f"[{_shown(key)}]{path}" for key, item in value.items()
                for path in (*_unmade(key, seen, depth, models), *_unmade(item, seen, depth, models))]
    if models and issubclass(kind, nn.Module) and not vflpriv_own(kind):  # the true type: ``__class__`` may lie
        return []
    if kind is types.MethodType:  # a hook of vflpriv's code bound to a layer (the ghost-clipping tape's)
        return [] if _vflpriv_code(value.__func__) else [" (a method)"]
    if kind is types.FunctionType:
        return [] if _vflpriv_code(value) else [" (a function)"]
    if options_model(kind):  # an options model holds plain data only
        return [f".{member} (a {class_named(item)})" for member, item in vars(value).items() if not plain_data(item)]
    if not vflpriv_own(kind) or not hasattr(value, "__dict__"):
        return [f" (a {type_named(kind)})"]
    inside = getattr(kind, "HOLDS_MODELS", False) is True  # the ghost-clipping tape: the bottom and its layers
    return [f".{member}{path}" for member, item in vars(value).items()
            if not (issubclass(kind, nn.Module) and member in _MODULE_STORAGE)
            for path in _unmade(item, seen, depth, inside)]


def _shown(key: object) -> str:
    """A dict key as a path shows it, running no code of its class (a plugin's ``__repr__``)."""
    return repr(key) if one_of(type(key), SCALARS) else f"a {class_named(key)} key"


def _vflpriv_code(f: object) -> bool:
    """Whether ``f`` is a Python function compiled from vflpriv's folders."""
    return type(f) is types.FunctionType and in_vflpriv(f.__code__.co_filename)


#: Python's own classes in a defense's MRO and its metaclass's.
_PYTHONS = frozenset({object, type, abc.ABC, abc.ABCMeta})


def claim_secrets(d: Protection | type) -> frozenset[str]:
    """The secrets the epsilon of ``d`` (a defense or its class) is recorded under, by a run and by a read alike (review
    acct F1): none where the class computing it (defining ``privacy_spent``; if not vflpriv's own,
    :func:`foreign_accounting` records nothing) computes none, as ``Protection``'s (iso); else its secrets narrowed to
    ``d``'s: a plugin's ``secrets`` may narrow them, never redirect them (an embedding-dp subclass: review l6 L1)."""
    k = accounting_class(d)
    if vars(k)["privacy_spent"] is vars(Protection)["privacy_spent"]:
        return frozenset()
    return declared_secrets(k) & declared_secrets(d)


def accounting_class(d: Protection | type) -> type:
    """The class whose ``privacy_spent`` computes the epsilon of ``d`` (a defense or its class)."""
    return next(k for k in (d if isinstance(d, type) else type(d)).__mro__ if "privacy_spent" in vars(k))


@dataclass(frozen=True)
class Verdict:
    """One defense's claim, judged once when its training is recorded (review acct 3): its index, the secrets its
    epsilon is recorded under (:func:`claim_secrets`), its (epsilon, delta) (None, NaN: none), why it does not hold
    ('' where it does, and at the identity: the defense is absent there, bit for bit) and why its code or data is not
    vflpriv's (:func:`tampered`: its notes are left out then)."""

    index: int
    secrets: frozenset[str]
    epsilon: float | None
    delta: float
    void: str
    tampered: str


def judged(defenses: list[Protection], verdicts: tuple[str, ...] = (), made: tuple[dict, ...] = (),
           recount: Callable[[int, Protection], str] | None = None) -> tuple[Verdict, ...]:
    """Each defense's :class:`Verdict`; ``verdicts`` and ``made``: the planner's (``Plan.verdicts``, ``Plan.made``);
    ``recount``: why an epsilon's count is not its settings' (``accountants.recounted``: the claim is void), or ''.
    Its accounting (``privacy_spent``, which may find it uncovered) runs once, where nothing voided it first."""
    out = []
    for i, (d, planned, kept) in enumerate(zip(defenses, _padded(verdicts, defenses), _padded(made, defenses, {}))):
        spoiled = tampered(d, kept)
        why = _uncovered(d, planned, spoiled)
        e = None if why else d.privacy_spent()
        if e is not None and recount is not None and (miscount := recount(i, d)):
            e, why = None, miscount
        why = "" if d.is_identity else why or _uncovered(d, planned, spoiled)
        out.append(Verdict(i, claim_secrets(d), e, math.nan if e is None else d.privacy_delta(), why, spoiled))
    return tuple(out)


def claiming(judgement: tuple[Verdict, ...], secret: str) -> list[Verdict]:
    """The verdicts of the defenses whose epsilon a record holds under ``secret`` (the labels: those claiming them
    alone; the features: those claiming them), held or void; none at the identity (absent there, bit for bit)."""
    return [v for v in judgement if (v.epsilon is not None or v.void)
            and (v.secrets == {LABELS} if secret == LABELS else FEATURES in v.secrets)]


def composed(verdicts: list[Verdict]) -> tuple[float, float]:
    """(epsilon, delta) of ``verdicts``' claims by basic composition (they add); NaN where there is none, or where one
    is void: basic composition bounds the training by the sum only where a bound covers each mechanism's releases, and
    a void one's are covered by none (dropping it from the sum would show a smaller epsilon: review fin17 F2)."""
    if not verdicts or any(v.void for v in verdicts):
        return math.nan, math.nan
    return sum(v.epsilon for v in verdicts), sum(v.delta for v in verdicts)


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
            f"({type_named(k)}.privacy_spent()) bounds ({', '.join(sorted(declared_secrets(k))) or 'none'}): a "
            "plugin's secrets may narrow them, never redirect them")


def withheld(defenses: list[Protection], names: list[str], judgement: tuple[Verdict, ...]) -> list[str]:
    """The notes of the claims a run records no (label) epsilon for: those recorded under other secrets than named
    (:func:`_unrecorded`), then those void."""
    return [note for d, v in zip(defenses, judgement) if v.epsilon is not None and (note := _unrecorded(d, v.secrets))
            ] + [f"{name}: no epsilon recorded: {v.void}" for name, v in zip(names, judgement) if v.void]


def _padded(given: tuple, defenses: list, missing: object = "") -> tuple:
    """The planner's verdicts or snapshots, one per defense (``missing`` where none was given)."""
    return (*given, *[missing] * (len(defenses) - len(given)))


def _uncovered(d: Protection, planned: str, spoiled: str) -> str:
    """Why ``d``'s claim does not hold: as planned (``Plan.verdicts``: code that cleared ``uncovered`` and deleted
    itself, review l10 2), as its mechanism found while it ran (``uncovered``), or judged when the run is recorded
    (``spoiled``, :func:`tampered`: a plugin's code clearing ``uncovered``: review l9 L9-1; another's writing into its
    data: :func:`altered`)."""
    return planned or d.uncovered or spoiled


def record_claims(record, judgement: tuple[Verdict, ...], defenses: list[Protection]) -> list[str]:
    """Writes a run's claims into ``record`` (:func:`composed`): the label epsilon and delta, the feature epsilon of
    those guarding its victim's finetuning features; returns the notes where a void claim leaves a secret without the
    others' sum, or the feature claims guard another party only (review final14 F7: one function, pinned)."""
    labels = claiming(judgement, LABELS)
    record.epsilon, record.epsilon_delta = composed(labels)
    features = claiming(judgement, FEATURES)
    guarding = [v for v in features if guards_victim(defenses[v.index], record.victim)]
    if guarding:
        record.epsilon_features, record.epsilon_features_delta = composed(guarding)
    notes = [_voiding(found, defenses, secret) for secret, found in ((LABELS, labels), (FEATURES, guarding))
             if any(v.void for v in found) and not all(v.void for v in found)]
    if not features or guarding or all(v.void for v in features):
        return notes
    return notes + [f"no feature epsilon at victim {record.victim}: the feature DP defenses guard other parties' "
                    "features" if record.victim != "" else "a label attack: the feature epsilon does not apply"]


def _voiding(found: list[Verdict], defenses: list[Protection], secret: str) -> str:
    """The note of a secret whose other claims hold but whose sum a void one leaves unproven."""
    void = ", ".join(defenses[v.index].name for v in found if v.void)
    return (f"no {secret} epsilon recorded: {void}'s claim is void, and the sum of the others bounds the training only "
            "where a bound covers every claiming defense's releases")


def guards_victim(defense, victim: str) -> bool:
    """Whether ``defense`` guards the finetuning features of the record's ``victim`` ("" for none)."""
    return victim.isdigit() and bool(getattr(defense, "guards", lambda *_: False)(int(victim), FINETUNE))
