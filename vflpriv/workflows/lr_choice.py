"""A sweep's grid over ``finetune.lr`` chosen per seed on the active party's validation split, never on the test set.

The sweep keeps every lr (each its own variant, as any axis); where its runs hold out a validation share
(``finetune.validation``), each deployment (every other setting, defense strength and seed) also takes the lr whose
validation utility is highest (the first lr of the grid on a tie: :func:`~vflpriv.workflows.reproductions.selection
.choose`, as ``vflpriv reproduce`` does), and the CAP of those choices is the sweep's honest CAP: choosing the lr on
the test utility would select on the test set. The choice has no recorded ε: it composes the grid's trainings of
the same labels and reads the validation labels without noise, so ``lr_chosen.csv`` carries no epsilon column.
"""

from __future__ import annotations

import re

import pandas as pd

from vflpriv.workflows.reproductions.selection import Selection, choose, setting_of

SETTING = "finetune.lr"


def _without_setting(variant: str) -> str:
    """A variant's name without the chosen setting (the row its choices are made within)."""
    parts = [p for p in re.split(r", (?=[\w.]+=)", variant or "") if p and not p.startswith(f"{SETTING}=")]
    return ", ".join(parts)


def lr_grid(results: pd.DataFrame) -> list:
    """The lrs a sweep's runs were made with, in ascending order (one value: no grid)."""
    return sorted({setting_of(c, SETTING) for c in results["config"] if isinstance(c, str) and c} - {None})


def chosen_on_validation(results: pd.DataFrame) -> pd.DataFrame | None:
    """The run each deployment chose (``selected``: its lr; ``variant``: its name without the lr), or None where the
    runs hold no lr grid or no validation utility (a grid without ``finetune.validation``: nothing to choose on)."""
    values = lr_grid(results)
    ok = results[results["status"] == "ok"]
    if len(values) < 2 or ok.empty or ok["utility_val"].isna().any():
        return None
    rows = ok["variant"].map(_without_setting) if "variant" in ok else pd.Series("", index=ok.index)
    chosen = choose(ok, Selection(SETTING, values, 0.0), rows)
    return chosen.assign(variant=chosen["row"]).drop(columns=["row"])
