"""A module imported when first used, not when its user is imported: ``vflpriv evaluate`` and every loky worker
import the runner, and scipy.stats (the canary p-values, the leakage test's t quantiles) was a third of their import
time for functions a command may never call."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


class Lazy:
    """Stands for ``module`` (or its attribute ``attr``); the first attribute read imports it."""

    def __init__(self, module: str, attr: str | None = None):
        self._module, self._attr, self._target = module, attr, None

    def __getattr__(self, name: str) -> Any:
        if self._target is None:
            target = importlib.import_module(self._module)
            self._target = getattr(target, self._attr) if self._attr else target
        return getattr(self._target, name)


def importing(*modules: str) -> Callable[[], None]:
    """A callable that imports ``modules``: a run's ``prepare`` (``run_into_store``) imports its report's modules
    while the workers finish the last trainings, so the report after them does not wait for its imports."""

    def prepare() -> None:
        for module in modules:
            importlib.import_module(module)

    return prepare
