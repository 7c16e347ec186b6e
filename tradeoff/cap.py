"""CAP (FedHSSL Definition 1) and its aggregation over seeds.

CAP = (1/v) * sum_lambda U(lambda) * (1 - A(lambda)) over a protection sweep lambda_1..lambda_v.
Higher is better: useful models whose labels the attack cannot recover.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

GROUP = ["method", "dataset", "attack", "defense", "phase"]
NAN = float("nan")


def cap(utility: Sequence[float], attack: Sequence[float]) -> float:
    """Mean over the sweep of U x (1 - A); the sequences are aligned by strength."""
    u = np.asarray(utility, dtype=float)
    a = np.asarray(attack, dtype=float)
    if u.shape != a.shape or u.ndim != 1:
        raise ValueError(f"utility and attack must be equal-length sequences, got {u.shape} and {a.shape}")
    if u.size == 0:
        raise ValueError("CAP needs at least one strength")
    return float(np.mean(u * (1.0 - a)))


def _fmt(values) -> str:
    return ", ".join(f"{v:g}" for v in values)


def cap_table(results: pd.DataFrame) -> pd.DataFrame:
    """CAP per seed over its strengths, then mean and std over seeds, per (method, dataset, attack, defense, phase).

    CAP is defined over the whole sweep: the expected strengths are every strength the group's records
    name (whatever their status). ``status`` says what the number covers:

    - ``ok``: every seed succeeded at every strength;
    - ``partial: seeds S left out ...``: those seeds failed at some strength; CAP is over the others;
    - ``incomplete: strengths X failed``: no seed succeeded at X, so there is no CAP (NaN);
    - ``n/a: ...``: the attack does not apply (a non-federated method).

    ``utility_metric`` names what U is (test accuracy, AUC or F1: one per dataset). ``cap_optimistic`` is the same CAP from ``attack_accuracy_optimistic`` (the attack's best epoch selected
    on the targets' labels, as both public attack codes report and the FedHSSL paper's tables print), for
    comparison with printed numbers only; NaN unless every counted run has it (the attack's
    ``report_best_epoch_on_targets`` option).
    """
    rows = []
    by = GROUP + (["variant"] if "variant" in results else [])
    for keys, group in results.groupby(by, sort=False):
        expected = sorted(group["strength"].unique())
        metric = _metric(group)
        if (group["status"] == "n/a").all():
            rows.append((*keys, metric, NAN, NAN, NAN, 0,
                         "n/a: " + str(group["error"].iloc[0]) if "error" in group else "n/a"))
            continue
        ok = group[group["status"] == "ok"]
        failed = [s for s in expected if s not in set(ok["strength"])]
        caps, optimistic, left_out = [], [], []
        for seed, runs in group.groupby("seed"):
            good = ok[ok["seed"] == seed].sort_values("strength")
            if sorted(good["strength"]) == expected:
                caps.append(cap(good["utility"], good["attack_accuracy"]))
                best = good.get("attack_accuracy_optimistic")
                if best is not None and best.notna().all():
                    optimistic.append(cap(good["utility"], best))
            else:
                left_out.append(seed)
        if failed:
            rows.append((*keys, metric, NAN, NAN, NAN, 0, f"incomplete: strengths {_fmt(failed)} failed"))
            continue
        status = "ok"
        if left_out:
            status = f"partial: seeds {_fmt(left_out)} left out (a strength failed for them)"
        if not caps:
            status = f"incomplete: no seed succeeded at every strength (seeds {_fmt(left_out)})"
        values = np.asarray(caps, dtype=float)
        rows.append((*keys, metric, float(values.mean()) if caps else NAN, float(values.std()) if caps else NAN,
                     float(np.mean(optimistic)) if caps and len(optimistic) == len(caps) else NAN, len(caps), status))
    return pd.DataFrame(rows, columns=[*by, "utility_metric", "cap", "cap_std", "cap_optimistic", "n_seeds", "status"])


def _metric(group: pd.DataFrame) -> str:
    """The utility metric of a group's CAP (one per dataset): its runs' metric, "" when none was scored."""
    if "utility_metric" not in group:
        return ""
    found = [m for m in group["utility_metric"].dropna().unique() if m]
    return str(found[0]) if found else ""


def strength_summary(results: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over seeds of utility, attack and prior accuracy and leakage (attack - prior accuracy, per seed)
    at each strength (and its axis name)."""
    ok = results[results["status"] == "ok"]
    if "strength_axis" not in ok:
        ok = ok.assign(strength_axis="lambda")
    if "leakage" not in ok:
        ok = ok.assign(leakage=ok["attack_accuracy"] - ok["prior_accuracy"])
    cols = ["utility", "attack_accuracy", "prior_accuracy", "leakage"]
    keys = GROUP + (["variant"] if "variant" in ok else []) + ["utility_metric", "strength_axis", "strength"]
    agg = ok.groupby(keys)[cols].agg(["mean", lambda c: c.std(ddof=0)])
    agg.columns = [f"{c}_{'mean' if s == 'mean' else 'std'}" for c, s in agg.columns]
    n = ok.groupby(keys)["seed"].count().rename("n_seeds")
    return agg.join(n).reset_index()


def strength_label(axis: str, strength: float) -> str:
    """``λ=5`` for the default noise axis, ``epsilon=1`` for label DP: the value on its own axis."""
    return f"{'λ' if axis == 'lambda' else axis}={strength:g}"
