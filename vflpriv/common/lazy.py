"""A module imported when first used, not when its user is imported: ``vflpriv evaluate`` and every loky worker
import the runner, and scipy.stats (the canary p-values, the leakage test's t quantiles) was a third of their import
time for functions a command may never call."""

from __future__ import annotations

import importlib
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
