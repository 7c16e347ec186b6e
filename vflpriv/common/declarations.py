"""Which code of a plugin's class its declarations do not cover (fail closed): the one walk that methods
(``label_uses``, ``feature_uses``) and defenses (``reads_labels``, ``reads_features``) share, so that the code an
epsilon rests on is judged by one rule (reviews fin F5, eps F2), and which classes are vflpriv's own."""

from __future__ import annotations

import abc
import importlib.util
import operator
import os
import sys
import types
import weakref
from collections.abc import Callable
from functools import cache
from pathlib import Path

from pydantic import BaseModel

#: vflpriv's packages installed from top-level folders of the checkout (setuptools package-dir), beside this file's.
SUBPACKAGES = ("vflpriv.attacks", "vflpriv.defenses", "vflpriv.auditors", "vflpriv.tradeoff", "vflpriv.reports")

#: vflpriv's package folders, located once when this module is first imported (by the configuration, before any
#: plugin loads): this file's package and the fixed :data:`SUBPACKAGES`, so that a module a plugin adds to
#: ``sys.modules`` names no folder (review final14 F5).
FOLDERS = (Path(__file__).resolve().parents[1], *(Path(f).resolve() for name in SUBPACKAGES
                                                  for f in importlib.util.find_spec(name).submodule_search_locations))


def class_code(k: type, exempt: frozenset[str]) -> list[str]:
    """The functions (or other callables or descriptors) class ``k`` defines, bar the ``exempt`` names."""
    return [f"{k.__name__}.{name}()" for name, value in vars(k).items()
            if (callable(value) or hasattr(value, "__get__")) and name not in exempt]


def uncovered_code(cls: type, than: str, *, exempt: frozenset[str],
                   trusted: Callable[[type], bool] = lambda k: False) -> list[str]:
    """The code of ``cls`` that its effective ``than`` (the first class of the MRO defining it) does not cover, as
    ``Class.name()``: every function of a class the declaring class does not inherit from, and a metaclass's code;
    ``trusted`` classes (vflpriv's own, for defenses) are left out."""
    declaring = next(k for k in cls.__mro__ if than in vars(k))
    found = [c for k in cls.__mro__ if not issubclass(declaring, k) and not trusted(k) for c in class_code(k, exempt)]
    return found + [c for meta in type(cls).__mro__ if meta not in (type, object, abc.ABCMeta) and not trusted(meta)
                    for c in class_code(meta, exempt)]


def undeclared_clause(code: list[str], text: str) -> tuple[str, ...]:
    """One clause naming ``code`` (at most six of its names) before ``text``, or ``()`` where there is none."""
    if not code:
        return ()
    named = ", ".join(code[:6]) + (f" and {len(code) - 6} more" if len(code) > 6 else "")
    return (f"its own code ({named}) {text}",)


def vflpriv_own(k: type) -> bool:
    """Whether class ``k`` is vflpriv's own code: its module's file lies in vflpriv's package folders and defines it
    (``__module__`` alone can name any module: review eps2 G6), and so does every function it defines (a class planted
    into a vflpriv module, or a built-in whose method was replaced, is not: review final14 F5), and its members are
    those its module defined (:func:`assigned_since`: data assigned by a plugin is not, review eps6 E4)."""
    return _defined_in_vflpriv(k) and _own_members(k)


#: Per class created in a module of vflpriv's folders (:func:`keep_defined`), its members as that module defined them.
_DEFINED: weakref.WeakKeyDictionary[type, dict[str, object]] = weakref.WeakKeyDictionary()

#: What Python sets on a class after ``__init_subclass__`` ran (``abc``; ``copyreg`` at the first copy or pickle of an
#: instance: review acc A1), as its module defined it all the same.
_SET_AFTER = frozenset({"__abstractmethods__", "_abc_impl", "__slotnames__"})
_ABSENT = object()


def keep_defined(k: type) -> None:
    """Keeps class ``k``'s members as its module defines them, where that module is a file of vflpriv's folders: called
    as the class is created (``__init_subclass__`` of the bases whose data decides a claim), before a plugin loads."""
    if in_vflpriv(getattr(sys.modules.get(k.__module__), "__file__", None)):
        _DEFINED[k] = {name: value for name, value in vars(k).items() if name not in _SET_AFTER}


def assigned_since(k: type) -> list[str]:
    """The members of class ``k`` (kept by :func:`keep_defined`) assigned, added or deleted since its module defined
    it, as ``Class.name``: a plugin's ``EmbeddingDP.secrets = frozenset({"labels"})`` at import (review eps6 E4)."""
    kept, now = _DEFINED.get(k), vars(k)
    if kept is None or (len(now) - len(_SET_AFTER & now.keys()) == len(kept)
                        and all(now.get(name, _ABSENT) is value for name, value in kept.items())):
        return []  # the common case, without building a dict (a method's own_code asks per MRO class)
    now = {name: value for name, value in now.items() if name not in _SET_AFTER}
    return [f"{k.__name__}.{name}" for name in sorted(kept.keys() | now.keys())
            if kept.get(name, _ABSENT) is not now.get(name, _ABSENT)]


def _defined_in_vflpriv(k: type) -> bool:
    """Whether the module ``k`` names is a file of vflpriv's folders that defines ``k`` under its qualified name."""
    module = defining_module(k)
    return module is not None and in_vflpriv(getattr(module, "__file__", None))


def defining_module(k: type) -> types.ModuleType | None:
    """The module ``k.__module__`` names where it defines ``k`` under its qualified name, else None (a class that
    only names a module: ``__module__`` can name any)."""
    module = sys.modules.get(k.__module__)
    defined = module
    for part in k.__qualname__.split("."):
        defined = getattr(defined, part, None)
    return module if defined is k else None


#: Per class, the members last judged and the verdict (a key reads it per defense and attack: 0.2 ms a class unkept;
#: a dry-run audit asks 35,000 times).
_JUDGED: weakref.WeakKeyDictionary[type, tuple[tuple, bool]] = weakref.WeakKeyDictionary()


def _own_members(k: type) -> bool:
    """Whether every function class ``k`` holds is compiled from vflpriv's folders and no member was assigned since its
    module defined it (:func:`assigned_since`): judged again only where one of its members is not the object last
    judged (the kept tuple holds them, so no id is reused). A function's code replaced in place (``__code__``
    assigned), or a member's value changed in place (a dict's item), is not seen: tampering with vflpriv's objects is
    outside it (docs/plugins.md)."""
    members = tuple(vars(k).values())
    kept = _JUDGED.get(k)
    if kept is None or len(kept[0]) != len(members) or not all(map(operator.is_, kept[0], members)):
        kept = _JUDGED[k] = members, not assigned_since(k) and _compiled_here(k)
    return kept[1]


def _compiled_here(k: type, *, exempt: frozenset[str] = frozenset()) -> bool:
    """Whether every function class ``k`` holds (bar the ``exempt`` names) is compiled from vflpriv's folders."""
    return all(functions is not None and all(in_vflpriv(f.__code__.co_filename) for f in functions)
               for functions in (_functions(value, name) for name, value in vars(k).items() if name not in exempt))


def options_model(model: type) -> bool:
    """Whether ``model`` is an options model of vflpriv's: a pydantic model each of whose classes above ``BaseModel``
    its module defines in vflpriv's folders, with functions compiled there only (a planted model's ``__new__`` ran as
    ``privacy_spent``: review l8 3); pydantic's own lazy ``__signature__`` is no code of it."""
    if not issubclass(model, BaseModel):
        return False
    return all(_defined_in_vflpriv(k) and _compiled_here(k, exempt=_PYDANTIC)
               for k in model.__mro__[:model.__mro__.index(BaseModel)])


#: What pydantic sets on each model class (a lazy descriptor, no code of the model's author).
_PYDANTIC = frozenset({"__signature__"})


def _functions(value: object, name: str) -> list[types.FunctionType] | None:
    """The Python functions class attribute ``name`` runs: a function, a classmethod's or staticmethod's, a property's
    accessors; none for data, a slot or, as ``Options``, an options model of vflpriv's (parsed, never run on a secret);
    None (unknown, fail closed) for any other callable or descriptor (a callable object, a builtin, a wrapper, another
    class such as ``float`` put in place of a method: review eps5 R1)."""
    if isinstance(value, (classmethod, staticmethod)):
        value = value.__func__
    if isinstance(value, type):  # any other class may run (reviews l7 1, l8 3)
        return [] if name == "Options" and options_model(value) else None
    if isinstance(value, property):
        found = [f for f in (value.fget, value.fset, value.fdel) if f is not None]
    elif isinstance(value, _SLOTS) or not (callable(value) or hasattr(value, "__get__")):
        return []
    else:
        found = [value]
    return found if all(isinstance(f, types.FunctionType) for f in found) else None


#: Descriptors of a class's C-level slots (``__dict__``, ``__weakref__``, ``__slots__``): no Python code.
_SLOTS = (types.GetSetDescriptorType, types.MemberDescriptorType)


@cache
def in_vflpriv(file: str | None) -> bool:
    """Whether ``file`` (a module's or a function's code's, absolute) lies in vflpriv's package folders."""
    if not file or not os.path.isabs(file):
        return False
    return any(Path(file).resolve().is_relative_to(folder) for folder in FOLDERS)


#: Python's exact scalar and container types of plain data.
SCALARS = (str, bytes, bool, int, float, type(None))
CONTAINERS = (tuple, list, set, frozenset)


def one_of(kind: type, kinds: tuple[type, ...]) -> bool:
    """Whether ``kind`` is one of ``kinds`` by identity: ``in`` compares with ``==``, which a metaclass may answer."""
    return any(kind is k for k in kinds)


def plain_data(value: object, *, depth: int = 32, size: int = 10_000) -> bool:
    """Whether ``value`` is plain data, of Python's exact built-in types all the way down (a frozenset subclass under a
    plugin's ``secrets`` ran its code whenever it was read: review l12 1), at most ``depth`` levels deep and ``size``
    items, repeats counted (a self-holding list, a tuple nested 10^5 deep or a 2^60-item shared one crashed or hung
    the checks: review l13 2): walked without recursion, running no code of the value's."""
    stack, seen = [(value, 0)], 0
    while stack:
        item, level = stack.pop()
        seen += 1
        kind = type(item)
        if seen > size or level > depth:
            return False
        if one_of(kind, SCALARS):
            continue
        if not (one_of(kind, CONTAINERS) or kind is dict) or seen + len(item) > size:
            return False
        stack.extend((x, level + 1) for x in (item if kind is not dict else (x for pair in item.items() for x in pair)))
    return True

