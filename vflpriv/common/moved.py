"""Module paths that moved in 0.2 (the ground floor regrouped by stage), importable from their old names with a
:class:`DeprecationWarning` through 0.2.x; 0.3 removes them. Only the paths ``docs/plugins.md`` published are kept:
a plugin written against 0.1 keeps working, and its warning names the new import."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

#: Old path -> new path, for the modules the plugin guide of 0.1 named.
MOVED = {
    "vflpriv.adversary": "vflpriv.engine.adversary",
    "vflpriv.errors": "vflpriv.common.errors",
    "vflpriv.options": "vflpriv.config.options",
    "vflpriv.seeding": "vflpriv.common.seeding",
}


class _MovedLoader(importlib.abc.Loader):
    def __init__(self, new: str):
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{spec.name} moved to {self.new} in vflpriv 0.2; the old path goes in 0.3: import {self.new}",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """The module is the new one, already executed."""


class MovedFinder(importlib.abc.MetaPathFinder):
    """Finds the old paths of :data:`MOVED` and hands out the module at its new path."""

    def find_spec(self, fullname, path=None, target=None):  # noqa: ANN001 - importlib's signature
        new = MOVED.get(fullname)
        return importlib.machinery.ModuleSpec(fullname, _MovedLoader(new)) if new else None


def install() -> None:
    """Put the finder on ``sys.meta_path`` once."""
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedFinder())
