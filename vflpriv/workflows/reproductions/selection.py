"""A finetuning setting (the lr) chosen per seed on the active party's validation rows, never on the test set.

An analogue's ``select: {setting, values, validation}`` runs its grid once per value of the dotted ``setting`` with
``finetune.validation`` held out; :func:`choose` keeps, per seed and every other setting, the run whose validation
utility is highest (the first value on a tie) and reports beside it what the paper reports, the best value and epoch
on the test set (``utility_optimistic``, so named), and the strongest attack over every training of the selection:
the adversary took part in each of them, so the audit's attack accuracy is the worst case over them
(``attack_accuracy_selection``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from vflpriv.common.errors import ConfigError


@dataclass(frozen=True)
class Selection:
    """The chosen setting (dotted), the values it is chosen from, and the share of labels held out to choose."""

    setting: str
    values: list[Any]
    validation: float

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Selection:
        missing = sorted({"setting", "values", "validation"} - set(raw))
        if missing:
            raise ConfigError(f"select lacks {', '.join(missing)} (it needs setting, values and validation)")
        if not isinstance(raw["values"], list) or len(raw["values"]) < 2:
            raise ConfigError(f"select.values must list at least 2 values of {raw['setting']}, got {raw['values']!r}")
        if not 0 < float(raw["validation"]) <= 0.5:
            raise ConfigError(f"select.validation must lie in (0, 0.5], got {raw['validation']!r}")
        return cls(str(raw["setting"]), list(raw["values"]), float(raw["validation"]))

    def parts(self, parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Each part once per value, every one with the validation split held out and its learning curve recorded
        (the optimistic column's best epoch)."""
        return [{**part, self.setting: v, "finetune.validation": self.validation, "finetune.curve": True}
                for part in parts or [{}] for v in self.values]


#: What a selection is made within: one deployment (its method and options, data, attack, defense at its strength,
#: seed), across the selected setting's values.
WITHIN = ["method", "row", "by", "dataset", "attack", "defense", "phase", "strength", "seed"]


def choose(runs: pd.DataFrame, selection: Selection, rows: pd.Series) -> pd.DataFrame:
    """Per deployment (``WITHIN``; ``rows`` names each run's table row), the run with the highest ``utility_val``,
    with ``utility_optimistic`` (the best test utility over the values and the epochs), ``attack_accuracy_selection``
    (the highest attack accuracy over the values' trainings) and ``selected`` (the value chosen). A deployment whose
    runs lack a validation utility (a run made without ``finetune.validation``) is refused."""
    if runs.empty:
        return runs
    runs = runs.assign(row=rows, selected=[setting_of(c, selection.setting) for c in runs["config"]])
    if runs["utility_val"].isna().any():
        raise ConfigError(f"select: {int(runs['utility_val'].isna().sum())} runs have no validation utility (made "
                          "without finetune.validation); rerun them with it")
    order = {repr(v): i for i, v in enumerate(selection.values)}
    runs = runs.assign(_rank=runs["selected"].map(lambda v: order.get(repr(v), len(order))))
    keys = [k for k in WITHIN if k in runs]
    chosen = []
    for _, group in runs.groupby(keys, sort=False, dropna=False):
        best = group.sort_values(["utility_val", "_rank"], ascending=[False, True], kind="stable").iloc[0].copy()
        best["utility_optimistic"] = _best_test(group)
        best["attack_accuracy_selection"] = group["attack_accuracy"].max()
        chosen.append(best)
    return pd.DataFrame(chosen).drop(columns=["_rank"])


def _best_test(group: pd.DataFrame) -> float:
    """The best test utility over the values' runs, over each run's epochs where it has a curve."""
    found = [u for u in group.get("utility_optimistic", pd.Series(dtype=float)) if not math.isnan(u)]
    return max([*found, *group["utility"]])


def setting_of(config: str | dict, dotted: str) -> Any:
    """The value of the dotted setting in a run's config (a dict, or its JSON), None where it is not set."""
    value = json.loads(config) if isinstance(config, str) else config
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value
