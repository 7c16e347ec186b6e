"""Store keys: the hash of a configuration, and what of it the hash leaves out or marks so that a store made by an
earlier version resumes where nothing changed and recomputes where a mechanism did (settings added later, revised
defenses, methods and attacks). The configurations themselves are in :mod:`vflpriv.config.schema`.

The data a run read is not in its key: its record carries the data's fingerprint (``RunRecord.data_fingerprint``), and
a stored record of other data is refused, or with ``--overwrite`` deleted and recomputed under the same key
(``tradeoff.sweep.drop_damaged``), so a store holds one result per configuration, never two of different data that a
table would pool as two seeds; records written before the fingerprint are kept (their data is unknown), so every
store resumes unchanged after the upgrade. A component's option given at its default is no part of a key: it is dropped
as the settings are validated (:mod:`vflpriv.config.defaults`)."""

from __future__ import annotations

import hashlib
import json
import marshal
import types
from typing import Any

from vflpriv.common.declarations import SCALARS, defining_module, one_of, plain_data, vflpriv_own
from vflpriv.common.errors import VflprivError
from vflpriv.config.registry import ATTACKS, AUDITORS, DEFENSES, METHODS


def config_hash(payload: dict[str, Any], length: int = 20) -> str:
    """Stable short hash of a JSON-able payload (sorted keys)."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:length]


#: Settings added after stores existed, with the value that leaves a run as it was (section, name, value): at that
#: value they are left out of the keys, so a store made before them resumes instead of rerunning every run; set, the
#: run is another. ``finetune.curve`` only measures; ``partition.canaries`` changes the labels the active party trains
#: with; ``finetune.top_depth`` the active party's top; ``finetune.bn_recalibrate`` the BatchNorm statistics evaluated;
#: ``finetune.validation`` the labeled samples trained on; ``finetune.auditor`` only measures, but its records carry it
#: (``finetune.auditor_options`` may craft its canaries' inputs); ``partition.aux_features``, ``attack.adversary`` and
#: ``attack.victim`` what a feature attack knows and who runs it against whom; ``partition.canary_labels`` the labels
#: the canaries are drawn from.
ADDED_LATER = (("finetune", "curve", False), ("partition", "canaries", 0), ("finetune", "top_depth", 0),
               ("finetune", "bn_recalibrate", False), ("finetune", "validation", 0.0), ("finetune", "auditor", None),
               ("finetune", "auditor_options", {}),
               ("partition", "aux_features", None), ("attack", "adversary", None), ("attack", "victim", None),
               ("partition", "canary_labels", "uniform"))


def keyed(dump: dict[str, Any]) -> dict[str, Any]:
    """``dump`` as the keys hash it: the settings of :data:`ADDED_LATER` at their neutral value left out (and
    ``partition.canary_labels`` where no canary is planted), and each defense whose mechanism was revised under its
    name (``Protection.revision``) marked with its revision, so that the runs of an earlier revision are recomputed
    rather than resumed, and a plugin defense with its code (:func:`code_mark`: an edited plugin is another run,
    review final14 F6), as is an auditor plugin (``finetune.auditor_code``: review eps6 E6; vflpriv's own auditors are
    in ``cache.code_version``); a method and an attack revised so (``Method.revision``, ``Attack.revision``) too."""
    for section, name, neutral in ADDED_LATER:
        if section in dump and dump[section].get(name, neutral) == neutral:
            dump[section] = {k: v for k, v in dump[section].items() if k != name}
    if "partition" in dump and not dump["partition"].get("canaries"):  # no canary: how their labels are drawn is moot
        dump["partition"] = {k: v for k, v in dump["partition"].items() if k != "canary_labels"}
    if dump.get("defenses"):
        dump["defenses"] = [{**d, **code_mark(DEFENSES, d["name"])} for d in dump["defenses"]]
    auditor = dump["finetune"].get("auditor") if isinstance(dump.get("finetune"), dict) else None
    if auditor and (mark := plugin_code(AUDITORS, auditor)):
        dump["finetune"] = {**dump["finetune"], "auditor_code": mark["code"]}
    for section, registry in (("method", METHODS), ("attack", ATTACKS)):
        part = dump.get(section)
        if isinstance(part, dict) and _revision(registry, part.get("name")):
            dump[section] = {**part, "revision": _revision(registry, part["name"])}
    return dump


def code_mark(registry, name: str) -> dict[str, Any]:
    """What of component ``name``'s code its cached results are keyed by beyond its settings: its revision where
    revised, and a plugin's code as loaded (:func:`loaded_code`; ``cache.code_version`` hashes only vflpriv's own
    packages), as ``pretrain_key`` does with a method's; empty for vflpriv's own at revision 0, whose keys stay what
    they were."""
    revision = _revision(registry, name)
    try:
        cls = registry.get(name)
    except VflprivError:
        return {}  # an unknown name: the planner says so
    mark = {"revision": revision} if revision else {}
    if _foreign(cls):
        mark["code"] = loaded_code(cls)
    return mark


def plugin_code(registry, name: str) -> dict[str, Any]:
    """:func:`code_mark`'s plugin code alone, as a pretraining's key holds it: ``cache.code_version`` there hashes
    vflpriv's own source, revised components included, so the keys of vflpriv's own stay what they were."""
    return {k: v for k, v in code_mark(registry, name).items() if k == "code"}


def loaded_code(cls: type) -> str:
    """A digest of the code class ``cls`` runs as loaded, with every base of its that is not vflpriv's own or a
    library's (:func:`_foreign`): each function's compiled code (file names left out, so the digest is the same
    wherever the plugin lives) and each plain class constant. It needs no source file (a class of a notebook,
    ``python -c`` or a zip has none), sees a base class edited in another module, and the code as loaded, not a file
    edited since (keyed anew only on reload)."""
    digest = hashlib.sha256()
    for klass in _foreign(cls):
        digest.update(f"{klass.__qualname__}\0".encode())
        for name, value in sorted(vars(klass).items()):
            if type(value) is classmethod or type(value) is staticmethod:  # exact types: no value's code runs
                value = value.__func__
            elif type(value) is property:
                value = value.fget
            if type(value) is types.FunctionType:
                digest.update(name.encode() + marshal.dumps(_portable(value.__code__)))
            elif one_of(type(value), _CONSTANTS) and plain_data(value):  # its repr runs no plugin code (a member's
                digest.update(f"{name}={value!r}\0".encode())  # ran before the claim's first look: review l13 1)
            elif isinstance(value, _CONSTANTS):  # a subclass, read without its code, never skipped (review l15 1)
                digest.update(f"{name}~{_constant(value)}\0".encode())
    return digest.hexdigest()[:16]


#: The built-in scalars whose own ``__repr__`` reads a subclass's value: ``SCALARS`` but None, bool before int.
_SCALAR_BASES = (bool, *(kind for kind in SCALARS if kind not in (bool, type(None))))


def _constant(value: object, depth: int = 0) -> str:
    """A class constant that is not plain data, as text read without running its class's code: its type's name and,
    for a subclass of a built-in scalar or tuple, the built-in's own reading of its value (an enum member, a numpy
    float, a named tuple: review l15 1); any other object, its type's name only."""
    kind = type(value)
    name = f"{vars(type)['__module__'].__get__(kind)}.{vars(type)['__qualname__'].__get__(kind)}"
    for base in _SCALAR_BASES:
        if issubclass(kind, base):
            return f"{name}:{base.__repr__(value)}"
    if issubclass(kind, tuple) and depth < 8 and tuple.__len__(value) <= 1000:
        return f"{name}:(" + ",".join(_constant(item, depth + 1) for item in tuple.__iter__(value)) + ")"
    return name


#: The kinds of class constant a plugin's digest holds (exact, and plain all the way down).
_CONSTANTS = (*SCALARS, tuple, frozenset)

#: The top-level packages whose classes a plugin's digest leaves out (their code is versioned elsewhere).
_LIBRARIES = frozenset({"builtins", "abc", "typing", "torch", "pydantic", "numpy"})


def _foreign(cls: type) -> list[type]:
    """The classes of ``cls``'s MRO that are neither a library's (a module of :data:`_LIBRARIES` that defines it: a
    class only naming one is not, review eps5 R8) nor vflpriv's own (``vflpriv_own``: a class naming a vflpriv module,
    planted in one or patched is not: review final14 F5)."""
    return [k for k in cls.__mro__ if not _library(k) and not vflpriv_own(k)]


def _library(k: type) -> bool:
    return k.__module__.split(".")[0] in _LIBRARIES and defining_module(k) is not None


def _portable(code: types.CodeType) -> types.CodeType:
    """``code`` and the code objects it holds (lambdas, comprehensions) without their file name."""
    consts = tuple(_portable(c) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename="", co_consts=consts)


def _revision(registry, name: str) -> int:
    try:
        return int(getattr(registry.get(name), "revision", 0))
    except (VflprivError, TypeError):
        return 0  # an unknown name: the planner says so
