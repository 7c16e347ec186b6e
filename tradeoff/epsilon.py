"""Empirical epsilon over seeds: each attack's canary guesses pooled over the independent trainings of a setting, the
worst case over attacks, and the check against the epsilon a DP defense claims.

Pooling is sound: each training's right guesses are dominated by a binomial (``vflpriv.common.empirical_epsilon``)
and the trainings are independent, so their sum is dominated by the binomial of the summed guesses. The worst case
over A attacks is the largest of their bounds each computed at level 5% / A (Bonferroni), so it is still a 95% bound.
A claim is violated when the pooled worst-case bound exceeds the claimed epsilon: then the defense's implementation,
or its accountant, is wrong for this setting.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from vflpriv.common.empirical_epsilon import ALPHA, menu_lower

GROUP = ["method", "dataset", "defense", "phase", "strength"]


def pooled_counts(rows: pd.DataFrame, *, column: str = "canary_counts") -> tuple[list[list[int]], int]:
    """(per menu entry [guesses, right] summed over the runs, canaries summed): the runs of one setting and attack (or
    of an auditor: ``column="auditor_counts"``)."""
    totals: list[list[int]] = []
    canaries = 0
    for text, count in zip(rows[column], rows["canaries"]):
        counts = json.loads(text) if isinstance(text, str) and text else []
        if not counts:
            continue
        canaries += int(count)
        for i, (guesses, right) in enumerate(counts):
            if i < len(totals):
                totals[i][0] += guesses
                totals[i][1] += right
            else:
                totals.append([guesses, right])
    return totals, canaries


def pooled_lower(rows: pd.DataFrame, *, alpha: float = ALPHA) -> tuple[float, int, float]:
    """(epsilon lower bound, guesses, accuracy of those guesses) of one attack's runs pooled; NaN where none guessed."""
    counts, canaries = pooled_counts(rows)
    if not counts:
        return float("nan"), 0, float("nan")
    classes = int(rows["num_classes"].iloc[0])
    delta = float(np.nan_to_num(rows["epsilon_lower_delta"].max(), nan=0.0))
    bound, guesses = menu_lower(counts, canaries=canaries, classes=classes, delta=delta, alpha=alpha)
    right = next(r for g, r in counts if g == guesses)  # every menu entry keeps at least one guess
    return bound, guesses, right / guesses


def epsilon_table(results: pd.DataFrame) -> pd.DataFrame:
    """Per setting (method, dataset, defense, phase, strength): each attack's pooled empirical epsilon, the worst case
    over the attacks (Bonferroni over them) naming the attack, the claimed epsilon (its accountant's, mean over seeds),
    and whether the claim is violated. Empty where no run had canaries."""
    frame = results[(results["status"] == "ok") & (results["canaries"] > 0)]
    rows = []
    for key, setting in frame.groupby(GROUP, sort=False, dropna=False):
        attacks = {a: r for a, r in setting.groupby("attack", sort=False) if pooled_counts(r)[0]}
        if not attacks:
            continue
        claimed, axis = float(setting["epsilon"].mean()), str(setting["strength_axis"].iloc[0])
        stronger = str(setting["strength_stronger"].iloc[0])
        # every attack kept guessed (a bound, never NaN); a tie goes to the last name, whatever the records' order
        worst = max((pooled_lower(r, alpha=ALPHA / len(attacks))[0], a) for a, r in attacks.items())
        for attack, runs in attacks.items():
            bound, guesses, accuracy = pooled_lower(runs)
            rows.append({**dict(zip(GROUP, key)), "axis": axis, "stronger": stronger, "attack": attack,
                         "epsilon_lower": bound,
                         "canary_guesses": guesses,
                         "canary_accuracy": accuracy, "seeds": int(runs["seed"].nunique()),
                         "epsilon_claimed": claimed})
        rows.append({**dict(zip(GROUP, key)), "axis": axis, "stronger": stronger, "attack": "worst-case",
                     "epsilon_lower": worst[0],
                     "canary_guesses": 0, "canary_accuracy": float("nan"), "seeds": int(setting["seed"].nunique()),
                     "epsilon_claimed": claimed, "strongest": worst[1]})
    table = pd.DataFrame(rows)
    if not table.empty:
        table["violated"] = table["epsilon_lower"] > table["epsilon_claimed"]
    return table
