"""A paper's claims judged on an analogue's records: held, not held, or not comparable, each with its reason.

A claim names runs by ``{method, options, by, strength}`` (the method's name, a subset of its options, the value
of the analogue's ``by`` setting, the defense strength; each optional; ``default_options: [names]`` keeps only the
runs that leave those options unset) and is one of

- ``greater: {metric, a, b, margin}``: the mean of ``metric`` over ``a``'s seeds exceeds ``b``'s by more than
  ``margin`` (default 0; -0.02 reads "at most 0.02 worse"), by a one-sided Welch t-test at 5% (held), or not;
  where a value is infinite (``mb_to_target`` of a seed that never reached it), by an exact one-sided
  Mann-Whitney test;
- ``above: {metric, a, value}``: ``a``'s mean exceeds ``value``, by a one-sided one-sample t-test at 5%;
- ``below: {metric, a, value}``: the upper end of the 95% interval of ``a``'s mean is below ``value``;
- ``within: {metric, a, b, margin}``: ``a`` and ``b`` are equivalent to within ``margin``: the 90% Welch interval of
  the difference of means lies inside (-margin, margin) (two one-sided tests at 5%);
- ``equals: {metric, a, value}``: every run of ``a`` has exactly ``value`` (message counts).

``metric`` is a column of the records (``mb_to_target`` with the analogue's ``targets``), or ``cap``: CAP (FedHSSL Definition 1) of each seed over the strengths its
sweep names (:func:`vflpriv.tradeoff.cap.seed_caps`; there ``strength`` selects nothing).

``not_comparable: REASON`` marks a claim this analogue cannot test (another dataset's scale, a missing baseline).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import pandas as pd
from scipy import stats

from vflpriv.common.errors import ConfigError

KINDS = ("greater", "above", "below", "within", "equals")
ALPHA = 0.05


@dataclass(frozen=True)
class Verdict:
    """A claim's verdict on the records: ``held``, ``not held`` or ``not comparable``, and why."""

    id: str
    text: str
    verdict: str
    reason: str


def select(runs: pd.DataFrame, where: dict[str, Any]) -> pd.DataFrame:
    """The runs matching ``where`` (``method``, ``options`` subset, ``by`` value); ``runs`` has the columns
    ``method``, ``options`` (dicts) and ``by``."""
    keep = pd.Series(True, index=runs.index)
    if "method" in where:
        keep &= runs["method"] == where["method"]
    for key, value in (where.get("options") or {}).items():
        keep &= runs["options"].map(lambda o, k=key, v=value: o.get(k) == v)
    for column in ("by", "strength"):
        if column in where:
            keep &= runs[column].map(lambda x, v=where[column]: same(x, v))
    if where.get("default_options"):  # only the runs with none of the options a sibling row sets
        keep &= runs["options"].map(lambda o: not any(k in o for k in where["default_options"]))
    return runs[keep]


def same(x: Any, y: Any) -> bool:
    """Equal as numbers where both are, else equal."""
    try:
        return math.isclose(float(x), float(y), rel_tol=1e-9)
    except (TypeError, ValueError):
        return x == y


def _describe(where: dict[str, Any]) -> str:
    parts = [where.get("method", "every method")]
    parts += [f"{k}={v}" for k, v in (where.get("options") or {}).items()]
    if "by" in where:
        parts.append(f"at {where['by']}")
    if "strength" in where:
        parts.append(f"strength {where['strength']}")
    return " ".join(map(str, parts))


def _values(runs: pd.DataFrame, where: dict[str, Any], metric: str) -> pd.Series:
    found = select(runs, where)[metric].astype(float)
    return found[found.notna()]


def judge(claim: dict[str, Any], runs: pd.DataFrame, *, caps: pd.DataFrame | None = None) -> Verdict:
    """The verdict of one claim (see the module) on ``runs`` (the analogue's successful records) and ``caps`` (their
    CAP per seed, for ``metric: cap``)."""
    cid, text = str(claim.get("id", "")), " ".join(str(claim.get("text", "")).split())
    if "not_comparable" in claim:
        return Verdict(cid, text, "not comparable", str(claim["not_comparable"]))
    kinds = [k for k in KINDS if k in claim]
    if len(kinds) != 1:
        raise ConfigError(f"claim {cid or text!r}: give exactly one of {', '.join(KINDS)} (or not_comparable)")
    kind, spec = kinds[0], claim[kinds[0]]
    metric = spec["metric"]
    frame = caps if metric == "cap" else runs
    if frame is None or (metric != "cap" and metric not in frame):
        return Verdict(cid, text, "not comparable", f"the records hold no {metric}")
    a = _values(frame, spec["a"], metric)
    if a.empty:
        return Verdict(cid, text, "not comparable", f"no successful run of {_describe(spec['a'])}")
    if kind in ("equals", "above", "below"):
        held, reason = _ONE_SAMPLE[kind](a, float(spec["value"]))
        return Verdict(cid, text, "held" if held else "not held", f"{metric} of {_describe(spec['a'])}: {reason}")
    b = _values(frame, spec["b"], metric)
    if b.empty:
        return Verdict(cid, text, "not comparable", f"no successful run of {_describe(spec['b'])}")
    names = f"{_describe(spec['a'])} {a.mean():.3f} vs {_describe(spec['b'])} {b.mean():.3f}"
    if kind == "within":
        held, reason = _equivalent(a, b, float(spec["margin"]))
    else:
        held, reason = _greater(a, b, float(spec.get("margin", 0.0)))
    return Verdict(cid, text, "held" if held else "not held", f"{metric}: {names} ({reason})")


def _equals(a: pd.Series, value: float) -> tuple[bool, str]:
    return bool((a == value).all()), f"{sorted(set(a.round(6)))} (claim: {value:g})"


def _above(a: pd.Series, value: float) -> tuple[bool, str]:
    if a.size < 2:
        return bool(a.mean() > value), f"{a.mean():+.3f} (claim: above {value:g}; one seed: no test)"
    with warnings.catch_warnings():  # identical seeds: scipy warns of precision loss, the NaN p is handled
        warnings.simplefilter("ignore", RuntimeWarning)
        p = _nan_p(float(stats.ttest_1samp(a, value, alternative="greater").pvalue), float(a.mean() - value))
    return p < ALPHA, f"{a.mean():+.3f} (claim: above {value:g}; one-sided t p = {p:.3g}, {a.size} runs)"


def _below(a: pd.Series, value: float) -> tuple[bool, str]:
    mean = float(a.mean())
    high = mean + (float(stats.t.ppf(0.975, a.size - 1)) * float(a.std(ddof=1)) / math.sqrt(a.size)
                   if a.size > 1 else 0.0)
    return high < value, f"{mean:+.3f}, 95% upper end {high:+.3f} (claim: below {value:g}; {a.size} runs)"


_ONE_SAMPLE = {"equals": _equals, "above": _above, "below": _below}


def _nan_p(p: float, diff: float) -> float:
    """A test's p-value where both samples are constant (NaN): 0 when the difference is positive, else 1."""
    return (0.0 if diff > 0 else 1.0) if math.isnan(p) else p


def _greater(a: pd.Series, b: pd.Series, margin: float) -> tuple[bool, str]:
    if math.inf in set(a) | set(b):  # some seed never got there (MB to a target): ranks, not means
        return _ranked(a, b, margin)
    diff = float(a.mean() - b.mean())
    shown = f"{diff:+.3f}" + (f", margin {margin:+g}" if margin else "")
    if a.size < 2 or b.size < 2:
        return diff > margin, f"{shown}; one seed: no test"
    with warnings.catch_warnings():  # a seed-constant count (one round's MB): precision warnings, not errors
        warnings.simplefilter("ignore", RuntimeWarning)
        p = _nan_p(float(stats.ttest_ind(a - margin, b, equal_var=False, alternative="greater").pvalue),
                   diff - margin)
    return p < ALPHA, f"{shown}; one-sided Welch p = {p:.3g}"


def _ranked(a: pd.Series, b: pd.Series, margin: float) -> tuple[bool, str]:
    """A one-sided Mann-Whitney U test (exact) of a - margin above b, for values with infinities (a target never
    reached): held at p <= 0.05 (with 3 seeds each, every seed of a above every seed of b)."""
    never = f"never reached: {int((a == math.inf).sum())}/{a.size} vs {int((b == math.inf).sum())}/{b.size} seeds"
    if a.size < 2 or b.size < 2:
        return bool(a.min() - margin > b.max()), f"{never}; one seed: no test"
    p = float(stats.mannwhitneyu(a - margin, b, alternative="greater", method="exact").pvalue)
    return p <= ALPHA, f"{never}; one-sided Mann-Whitney p = {p:.3g}"


def _equivalent(a: pd.Series, b: pd.Series, margin: float) -> tuple[bool, str]:
    """Two one-sided Welch tests at 5%: the 90% interval of the difference inside (-margin, margin)."""
    diff = float(a.mean() - b.mean())
    if a.size < 2 or b.size < 2:
        return abs(diff) < margin, f"{diff:+.3f}, margin {margin:g}; one seed: no test"
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1)) if se > 0 else a.size + b.size - 2
    half = float(stats.t.ppf(1 - ALPHA, df)) * se
    low, high = diff - half, diff + half
    return (-margin < low and high < margin,
            f"{diff:+.3f}, 90% interval [{low:+.3f}, {high:+.3f}], margin {margin:g}; two one-sided Welch tests")
