"""Does an attack leak beyond the adversary's prior, and at what defense strength does it stop?

Leakage of one seed is attack accuracy minus prior accuracy on the same targets (same seed: same
partition, same auxiliary set). Over seeds, the paired differences give a t-based 95% interval and a
one-sided paired t-test of "leakage > 0" (Student 1908; the attack and the prior share everything but
the federation, so the pairing is by seed). With one seed there is no test.

Verdicts, with a tolerance ``margin`` (default 0.02 accuracy):

- ``yes``: the interval's lower bound is above 0 (the attack beats the prior, p < 0.025 one-sided);
- ``no``: the interval's upper bound is below ``margin`` (any leakage is shown to be smaller than it);
- ``attack failed``: the upper bound is below ``-margin``: the attack did worse than the prior, which
  knows nothing of the federation, so it failed to train (e.g. a self-training collapse) and says nothing
  about leakage; reported apart rather than as a reassuring ``no``;
- ``inconclusive``: neither (too few seeds, or leakage near the margin).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy import stats

MARGIN = 0.02
TEST_NAME = "paired t-test over seeds (attack vs prior accuracy on each seed), 95% interval"


def verdict_rule(margin: float) -> str:
    """The rule the verdicts follow, stated for a reader of the report (p is one-sided, for "leakage > 0")."""
    return (f"yes when the 95% interval of the leakage lies above 0 (equivalently one-sided p < 0.025); no when it "
            f"lies below the margin +{margin:g}; attack failed when it lies below -{margin:g}; inconclusive otherwise. "
            "p is the one-sided p-value of the paired t-test of leakage > 0, so an inconclusive verdict can have "
            "p < 0.05")


@dataclass(frozen=True)
class LeakageTest:
    n_seeds: int
    attack_mean: float
    prior_mean: float
    leakage: float
    ci_low: float
    ci_high: float
    p_value: float
    verdict: str

    def to_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}


def paired_leakage(attack: np.ndarray, prior: np.ndarray, *, margin: float = MARGIN) -> LeakageTest:
    """The paired test of ``attack - prior`` over seeds (arrays aligned by seed)."""
    attack, prior = np.asarray(attack, float), np.asarray(prior, float)
    d = attack - prior
    n = d.size
    mean = float(d.mean()) if n else math.nan
    if n < 2:
        return LeakageTest(n, float(attack.mean()) if n else math.nan, float(prior.mean()) if n else math.nan,
                           mean, math.nan, math.nan, math.nan, "inconclusive")
    se = float(d.std(ddof=1)) / math.sqrt(n)
    if se == 0.0:  # every seed leaks the same: the interval is that value
        low = high = mean
        p = 0.0 if mean > 0 else 1.0
    else:
        crit = float(stats.t.ppf(0.975, n - 1))
        low, high = mean - crit * se, mean + crit * se
        p = float(stats.t.sf(mean / se, n - 1))
    verdict = "yes" if low > 0 else "attack failed" if high < -margin else "no" if high < margin else "inconclusive"
    return LeakageTest(n, float(attack.mean()), float(prior.mean()), mean, low, high, p, verdict)


def leakage_test(records: pd.DataFrame, *, margin: float = MARGIN) -> LeakageTest:
    """The test over the successful records of one (attack, phase, defense, strength), one per seed."""
    ok = records[records["status"] == "ok"].sort_values("seed")
    return paired_leakage(ok["attack_accuracy"].to_numpy(), ok["prior_accuracy"].to_numpy(), margin=margin)


def falls_to_prior(records: pd.DataFrame, *, margin: float = MARGIN) -> dict | None:
    """The weakest strength of one defense sweep at which the mean leakage over seeds is at most ``margin``:
    {strength, axis, leakage, utility}, or None if no swept strength gets there."""
    ok = records[records["status"] == "ok"]
    if ok.empty:
        return None
    stronger_is_lower = (ok["strength_stronger"] == "lower").any()
    means = ok.assign(leak=ok["attack_accuracy"] - ok["prior_accuracy"]).groupby("strength")[["leak", "utility"]].mean()
    for strength in sorted(means.index, reverse=bool(stronger_is_lower)):
        if means.loc[strength, "leak"] <= margin:
            return {"strength": float(strength), "axis": str(ok["strength_axis"].iloc[0]),
                    "leakage": float(means.loc[strength, "leak"]), "utility": float(means.loc[strength, "utility"])}
    return None
