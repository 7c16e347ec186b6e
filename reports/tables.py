"""Console tables from records (rich): per-strength numbers and CAP.

Columns that hold one value for the whole table (e.g. the dataset) move into the title, so the
table stays readable in an 80-column terminal.
"""

from __future__ import annotations

import pandas as pd
from rich.table import Table

from vflpriv.tradeoff.cap import strength_label

CONTEXT = ["method", "dataset", "attack", "defense", "phase"]


def _pm(mean: float, std: float) -> str:
    return "n/a" if pd.isna(mean) else f"{mean:.3f} ± {std:.3f}"


def _split_context(frame: pd.DataFrame) -> tuple[list[str], str]:
    varying = [c for c in CONTEXT if frame[c].nunique() > 1]
    fixed = ", ".join(f"{c} {frame[c].iloc[0]}" for c in CONTEXT if c not in varying)
    return varying, fixed


def strength_table(summary: pd.DataFrame) -> Table:
    """Per strength: utility, attack accuracy and prior, mean ± std over seeds."""
    varying, fixed = _split_context(summary)
    metric = summary["utility_metric"].iloc[0] if "utility_metric" in summary else "utility"
    table = Table(title=f"{fixed} (mean ± std over seeds)")
    for col in (*varying, "strength", f"utility ({metric})", "attack acc", "prior acc", "seeds"):
        table.add_column(col, justify="right")
    for _, r in summary.iterrows():
        table.add_row(
            *(str(r[c]) for c in varying), strength_label(r["strength_axis"], r["strength"]),
            _pm(r["utility_mean"], r["utility_std"]), _pm(r["attack_accuracy_mean"], r["attack_accuracy_std"]),
            _pm(r["prior_accuracy_mean"], r["prior_accuracy_std"]), str(int(r["n_seeds"])),
        )
    return table


def cap_rich_table(caps: pd.DataFrame) -> Table:
    """CAP mean ± std over seeds per (method, dataset, attack, defense, phase), or why there is none."""
    table = Table(title="CAP = mean over λ of U × (1 − A), higher is better")
    for col in (*CONTEXT, "CAP", "seeds"):
        table.add_column(col)
    for _, r in caps.iterrows():
        status = r.get("status", "ok")
        shown = _pm(r["cap"], r["cap_std"]) if pd.notna(r["cap"]) else status
        table.add_row(*(str(r[c]) for c in CONTEXT), shown, str(int(r["n_seeds"])))
    return table
