"""Name -> component registries, filled from entry points exactly like third-party plugins.

Built-in methods, attacks, defenses, datasets and auditors are declared as entry points in ``pyproject.toml``
(groups ``vflpriv.methods``, ``vflpriv.attacks``, ``vflpriv.defenses``, ``vflpriv.datasets``, ``vflpriv.auditors``),
so the plugin path is exercised by every run. Unregistered code is reachable as ``package.module:Object``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable, Generic, TypeVar

from vflpriv.common.errors import ConfigError, UnknownNameError, class_named, exception_text
from vflpriv.config import plugin_checks

T = TypeVar("T")


@dataclass
class Registry(Generic[T]):
    """A lazily loaded mapping of names to objects of one kind (``kind`` names it in messages)."""

    kind: str
    group: str
    #: What an object of this kind must be, as a check returning the problem (None when it fits).
    check: Callable[[Any], str | None] = lambda obj: None
    _extra: dict[str, T] = field(default_factory=dict)
    _cache: dict[str, T] = field(default_factory=dict)
    _installed: dict[str, Any] | None = None
    _shadowing: dict[str, Any] = field(default_factory=dict)
    _builtins: frozenset[str] = frozenset()

    def register(self, name: str, obj: T) -> T:
        """Add ``obj`` under ``name`` at run time (tests, notebooks); entry points are the usual way. A built-in's name,
        in any case, is refused (:meth:`_entry_points`), and ``obj`` is checked as a ``package.module:Object`` is."""
        self._entry_points()
        if any(b.casefold() == name.casefold() for b in self._builtins):
            raise ConfigError(f"cannot register {_a(self.kind)} as '{name}': that is a built-in {self.kind}'s "
                              f"name{_case(name, self._builtins)}, and a plugin under it would share its stored "
                              "runs; register it under another name")
        problem = self.check(obj)
        if problem is not None:
            raise ConfigError(f"cannot register {_a(self.kind)} as '{name}': it is not a vflpriv {self.kind}: "
                              f"{problem}")
        self._extra[name] = obj
        return obj

    def _entry_points(self) -> dict[str, Any]:
        """The group's installed entry points, read once per process (a read scans every installed distribution's
        metadata, about 6 ms; the tables asked for the names once per configuration they named). A built-in's name
        stays vflpriv's: another package's entry point under it is refused where the name is used, as its runs would
        share the built-in's keys and stored records (review final14 F6)."""
        if self._installed is None:
            found = list(entry_points(group=self.group))
            self._builtins = frozenset(ep.name for ep in found if _builtin(ep))
            folded = {b.casefold() for b in self._builtins}  # in any case, as ``register`` (review misc F9)
            self._installed = {ep.name: ep for ep in found if _builtin(ep) or ep.name.casefold() not in folded}
            self._shadowing = {ep.name: ep for ep in found if ep.name.casefold() in folded and not _builtin(ep)}
        return self._installed

    def builtin(self, name: str) -> bool:
        """Whether ``name`` is one of vflpriv's own (an installed entry point of vflpriv's), not a plugin's: of the
        names read once with the entry points (reading an entry point's distribution takes milliseconds)."""
        self._entry_points()
        return name not in self._extra and name in self._builtins

    def names(self) -> list[str]:
        return sorted(set(self._entry_points()) | set(self._extra))

    def get(self, name: str) -> T:
        """Resolve a registered name or ``package.module:Object``; unknown names list the valid ones."""
        if name in self._extra:
            return self._extra[name]
        if name in self._cache:
            return self._cache[name]
        eps = self._entry_points()
        if name in self._shadowing:
            other = self._shadowing[name]
            raise ConfigError(f"the installed package '{other.dist.name}' declares {self.kind} '{name}' "
                              f"({other.value}), a built-in {self.kind}'s name{_case(name, self._builtins)}: its "
                              f"runs would share the built-in's "
                              f"stored runs; rename it in that package's entry points, or uninstall it")
        if name in eps:
            obj = _loaded(lambda: eps[name].load(), f"cannot load the installed {self.kind} '{name}' "
                                                   f"({eps[name].value})")
        elif ":" in name:
            obj = _import_object(name, self.kind)
        else:
            raise UnknownNameError(
                f"unknown {self.kind} '{name}'; valid {self.kind}s: {', '.join(self.names())} "
                "(or package.module:Object for an unregistered one)"
            )
        problem = self.check(obj)
        if problem is not None:
            raise UnknownNameError(f"'{name}' is not a vflpriv {self.kind}: {problem}")
        self._cache[name] = obj
        return obj


def _case(name: str, builtins: frozenset[str]) -> str:
    """'' where ``name`` is a built-in's name as written, else which one it spells in another case."""
    same = next(b for b in sorted(builtins) if b.casefold() == name.casefold())
    return "" if same == name else f" ('{same}') in another case"


def _a(kind: str) -> str:
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def _builtin(entry: Any) -> bool:
    """Whether an installed entry point is vflpriv's own (a built-in)."""
    return entry is not None and entry.dist is not None and entry.dist.name == "vflpriv"


def _loaded(load: Callable[[], Any], what: str) -> Any:
    """``load()``: a plugin's module imported. Any failure of the user's code there (an exception, a ``sys.exit``)
    is bad input: one error naming it, the original kept as the cause (``vflpriv --debug`` shows its traceback)."""
    try:
        return load()
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - user code
        detail = (f"it called sys.exit({exception_text(exc) or None})" if isinstance(exc, SystemExit)
                  else f"{class_named(exc)}: {exception_text(exc)}")  # its text bounded, its __str__ failing as '?'
        raise UnknownNameError(f"{what}: {detail}") from exc


def _import_object(path: str, kind: str) -> Any:
    module_name, _, attr = path.partition(":")
    top = module_name.split(".")[0]
    try:
        module = _loaded(lambda: importlib.import_module(module_name), f"cannot import {kind} '{path}'")
    except UnknownNameError as exc:
        here = Path.cwd()
        if isinstance(exc.__cause__, ModuleNotFoundError) and top and ((here / f"{top}.py").exists()
                                                                         or (here / top).is_dir()):
            raise UnknownNameError(f"{exc.args[0]}; {top} is in the current folder, which the vflpriv command does not "
                                   f"import from: run PYTHONPATH=. vflpriv ..., python -m vflpriv ..., or pip install "
                                   "the plugin") from exc.__cause__
        raise
    if not hasattr(module, attr):
        raise UnknownNameError(f"cannot import {kind} '{path}': module {module_name} has no {attr or 'object name'} "
                               f"(give package.module:Object)")
    return getattr(module, attr)


def _has(*members: str) -> Callable[[Any], str | None]:
    """Structural check: the registry imports no component package (they import the engine, which imports
    the configuration, which reads the dataset registry), so it checks what a component must have."""

    def check(obj: Any) -> str | None:
        missing = [m for m in members if not hasattr(obj, m)]
        if not isinstance(obj, type) or missing:
            return f"expected a class with {', '.join(members)}" + (f" (missing {', '.join(missing)})" if missing else "")
        return None

    return check


def _derived(*members: str, base: str) -> Callable[[Any], str | None]:
    """:func:`_has`, then a subclass of vflpriv's ``base`` (module.Class), known by name (the registry imports no
    component package): planning reads the base's other attributes, and a class without them failed there with an
    AttributeError traceback."""

    def check(obj: Any) -> str | None:
        problem = _has(*members)(obj)
        if problem is None and base not in (f"{k.__module__}.{k.__qualname__}" for k in obj.__mro__):
            return f"expected a subclass of {base} (docs/plugins.md)"
        return problem

    return check


def _is_attack(obj: Any) -> str | None:
    """An attack class whose declarations planning can use (:func:`plugin_checks.attack_problem`): an unknown secret
    failed deep in planning (no prior, no scores for it)."""
    problem = _derived("infer", "required_messages", "needs_encoder", base="vflpriv.attacks.base.Attack")(obj)
    return problem if problem is not None else plugin_checks.attack_problem(obj)


def _is_defense(obj: Any) -> str | None:
    """A defense class whose declarations planning can use (:func:`plugin_checks.defense_problem`)."""
    problem = _derived("protects", "axis", "supported_kinds", base="vflpriv.defenses.base.Protection")(obj)
    return problem if problem is not None else plugin_checks.defense_problem(obj)


def _is_loader(obj: Any) -> str | None:
    return None if callable(obj) and not isinstance(obj, type) else "expected a loader function returning a VerticalDataset"


METHODS: Registry[Any] = Registry("method", "vflpriv.methods", _derived(
    "pretrain", "finetune", "predict", "sends", "pretrains", "federated", base="vflpriv.methods.base.Method"))
ATTACKS: Registry[Any] = Registry("attack", "vflpriv.attacks", _is_attack)
DEFENSES: Registry[Any] = Registry("defense", "vflpriv.defenses", _is_defense)
DATASETS: Registry[Any] = Registry("dataset", "vflpriv.datasets", _is_loader)
AUDITORS: Registry[Any] = Registry("auditor", "vflpriv.auditors", _derived(
    "audits", "bind", "audit_update", "guesses", base="vflpriv.auditors.base.Auditor"))

REGISTRIES: dict[str, Registry[Any]] = {
    "methods": METHODS,
    "attacks": ATTACKS,
    "defenses": DEFENSES,
    "datasets": DATASETS,
    "auditors": AUDITORS,
}
