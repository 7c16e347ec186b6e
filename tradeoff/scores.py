"""The records' views shared by CAP and the worst case: the grouping columns, a feature attack's score relative to its
prior, and the columns a loop over groups reads (so neither module imports the other's helpers)."""

from __future__ import annotations

import pandas as pd

GROUP = ["method", "dataset", "attack", "defense", "phase"]
NAN = float("nan")
#: Columns that tell a feature attack's records apart: the worst case over attacks never mixes secrets or victims.
SECRET = ["secret", "victim"]


def secret_columns(results: pd.DataFrame) -> list[str]:
    """:data:`SECRET` and the adversary where the results hold a feature attack's records (one attack run by two
    adversaries, e.g. the active party and the server, is two rows); label-only results keep their columns."""
    if "secret" not in results or not (results["secret"] == "features").any():
        return []
    return ["secret", *(["adversary"] if "adversary" in results else []), "victim"]


def scored(results: pd.DataFrame) -> pd.DataFrame:
    """The records with each feature attack's ``attack_accuracy`` set to its performance relative to its prior,
    A = 1 - min(1, feature MSE / prior MSE) (so 1 - A is the privacy score of the module's docstring), and its
    ``prior_accuracy`` to 0 (the prior's own performance on that scale); label records unchanged."""
    if "secret" not in results or not (results["secret"] == "features").any():
        return results
    features = results["secret"] == "features"
    ratio = (pd.to_numeric(results["feature_mse"], errors="coerce") /
             pd.to_numeric(results["prior_mse"], errors="coerce")).clip(lower=0, upper=1)
    out = results.copy()
    out.loc[features, "attack_accuracy"] = 1.0 - ratio[features]
    out.loc[features, "prior_accuracy"] = 0.0
    return out


def narrowed(results: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """``results`` with only those of ``columns`` it has: a loop over groups then copies what it reads, not every
    column of a record (a feature attack's per-target errors among them)."""
    return results[[c for c in dict.fromkeys(columns) if c in results]]


def shown(results: pd.DataFrame) -> pd.DataFrame:
    """The records as tables and plots show them: a feature attack's ``attack_accuracy`` and ``prior_accuracy``
    columns hold its and its prior's MSE (its ``leakage`` is already prior - attack MSE); label records unchanged."""
    if "secret" not in results or not (results["secret"] == "features").any():
        return results
    features = results["secret"] == "features"
    out = results.copy()
    out.loc[features, "attack_accuracy"] = pd.to_numeric(results.loc[features, "feature_mse"], errors="coerce")
    out.loc[features, "prior_accuracy"] = pd.to_numeric(results.loc[features, "prior_mse"], errors="coerce")
    return out


def listed(values) -> str:
    """``1, 25``: numbers as a table cell lists them."""
    return ", ".join(f"{v:g}" for v in values)
