"""CAP (FedHSSL Definition 1) and its aggregation over seeds.

CAP = (1/v) * sum_lambda U(lambda) * (1 - A(lambda)) over a protection sweep lambda_1..lambda_v.
Higher is better: useful models whose labels the attack cannot recover.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

GROUP = ["method", "dataset", "attack", "defense", "phase"]


def cap(utility: Sequence[float], attack: Sequence[float]) -> float:
    """Mean over the sweep of U x (1 - A); the sequences are aligned by strength."""
    u = np.asarray(utility, dtype=float)
    a = np.asarray(attack, dtype=float)
    if u.shape != a.shape or u.ndim != 1:
        raise ValueError(f"utility and attack must be equal-length sequences, got {u.shape} and {a.shape}")
    if u.size == 0:
        raise ValueError("CAP needs at least one strength")
    return float(np.mean(u * (1.0 - a)))


def cap_table(results: pd.DataFrame) -> pd.DataFrame:
    """CAP per seed over its strengths, then mean and std over seeds, per (method, dataset, attack, defense, phase).

    Only successful runs count; a seed missing a strength is left out of its group's CAP.
    """
    ok = results[results["status"] == "ok"]
    n_strengths = ok.groupby(GROUP)["strength"].nunique().rename("n_strengths")
    rows = []
    for keys, group in ok.groupby(GROUP + ["seed"]):
        expected = n_strengths.loc[tuple(keys[:-1])]
        group = group.sort_values("strength")
        if group["strength"].nunique() != expected:
            continue
        rows.append((*keys, cap(group["utility"], group["attack_accuracy"])))
    per_seed = pd.DataFrame(rows, columns=GROUP + ["seed", "cap"])
    if per_seed.empty:
        return pd.DataFrame(columns=GROUP + ["cap", "cap_std", "n_seeds"])
    table = per_seed.groupby(GROUP)["cap"].agg(cap="mean", cap_std=lambda c: c.std(ddof=0), n_seeds="count")
    return table.reset_index()


def strength_summary(results: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over seeds of utility, attack and prior accuracy at each strength (and its axis name)."""
    ok = results[results["status"] == "ok"]
    if "strength_axis" not in ok:
        ok = ok.assign(strength_axis="lambda")
    cols = ["utility", "attack_accuracy", "prior_accuracy"]
    keys = GROUP + ["utility_metric", "strength_axis", "strength"]
    agg = ok.groupby(keys)[cols].agg(["mean", lambda c: c.std(ddof=0)])
    agg.columns = [f"{c}_{'mean' if s == 'mean' else 'std'}" for c, s in agg.columns]
    n = ok.groupby(keys)["seed"].count().rename("n_seeds")
    return agg.join(n).reset_index()


def strength_label(axis: str, strength: float) -> str:
    """``λ=5`` for the default noise axis, ``epsilon=1`` for label DP: the value on its own axis."""
    return f"{'λ' if axis == 'lambda' else axis}={strength:g}"
