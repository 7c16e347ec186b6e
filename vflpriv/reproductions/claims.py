"""A paper's claims judged on an analogue's records: held, not held, or not comparable, each with its reason.

A claim names runs by ``{method, options, by}`` (the method's name, a subset of its options, the value of the
analogue's ``by`` setting; each optional; ``default_options: [names]`` keeps only the runs that leave those options
unset) and is one of

- ``greater: {metric, a, b}``: the mean of ``metric`` over ``a``'s seeds exceeds ``b``'s, by a one-sided Welch
  t-test at 5% (held), or not;
- ``equals: {metric, a, value}``: every run of ``a`` has exactly ``value`` (message counts);
- ``below: {metric, a, value}``: the upper end of the 95% interval of ``a``'s mean is below ``value``.

``not_comparable: REASON`` marks a claim this analogue cannot test (another dataset's scale, a missing baseline).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd
from scipy import stats

from vflpriv.errors import ConfigError

KINDS = ("greater", "equals", "below")


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
    if "by" in where:
        keep &= runs["by"].map(lambda x: _same(x, where["by"]))
    if where.get("default_options"):  # only the runs with none of the options a sibling row sets
        keep &= runs["options"].map(lambda o: not any(k in o for k in where["default_options"]))
    return runs[keep]


def _same(x: Any, y: Any) -> bool:
    try:
        return math.isclose(float(x), float(y), rel_tol=1e-9)
    except (TypeError, ValueError):
        return x == y


def _describe(where: dict[str, Any]) -> str:
    parts = [where.get("method", "every method")]
    parts += [f"{k}={v}" for k, v in (where.get("options") or {}).items()]
    if "by" in where:
        parts.append(f"at {where['by']}")
    return " ".join(map(str, parts))


def _values(runs: pd.DataFrame, where: dict[str, Any], metric: str) -> pd.Series:
    found = select(runs, where)[metric].astype(float)
    return found[found.notna()]


def judge(claim: dict[str, Any], runs: pd.DataFrame) -> Verdict:
    """The verdict of one claim (see the module) on ``runs`` (the analogue's successful records)."""
    cid, text = str(claim.get("id", "")), " ".join(str(claim.get("text", "")).split())
    if "not_comparable" in claim:
        return Verdict(cid, text, "not comparable", str(claim["not_comparable"]))
    kinds = [k for k in KINDS if k in claim]
    if len(kinds) != 1:
        raise ConfigError(f"claim {cid or text!r}: give exactly one of {', '.join(KINDS)} (or not_comparable)")
    kind, spec = kinds[0], claim[kinds[0]]
    metric = spec["metric"]
    a = _values(runs, spec["a"], metric)
    if a.empty:
        return Verdict(cid, text, "not comparable", f"no successful run of {_describe(spec['a'])}")
    if kind == "equals":
        held = bool((a == float(spec["value"])).all())
        return Verdict(cid, text, "held" if held else "not held",
                       f"{metric} of {_describe(spec['a'])}: {sorted(set(a.round(6)))} (claim: {spec['value']})")
    if kind == "below":
        mean = float(a.mean())
        high = mean + (float(stats.t.ppf(0.975, a.size - 1)) * float(a.std(ddof=1)) / math.sqrt(a.size)
                       if a.size > 1 else 0.0)
        held = high < float(spec["value"])
        return Verdict(cid, text, "held" if held else "not held",
                       f"{metric} of {_describe(spec['a'])}: {mean:+.3f}, 95% upper end {high:+.3f} "
                       f"(claim: below {spec['value']}; {a.size} runs)")
    b = _values(runs, spec["b"], metric)
    if b.empty:
        return Verdict(cid, text, "not comparable", f"no successful run of {_describe(spec['b'])}")
    diff = float(a.mean() - b.mean())
    if a.size > 1 and b.size > 1:
        p = float(stats.ttest_ind(a, b, equal_var=False, alternative="greater").pvalue)
        p = 0.0 if math.isnan(p) and diff > 0 else 1.0 if math.isnan(p) else p
        held, test = p < 0.05, f"one-sided Welch p = {p:.3g}"
    else:
        held, test = diff > 0, "one seed: no test"
    return Verdict(cid, text, "held" if held else "not held",
                   f"{metric}: {_describe(spec['a'])} {a.mean():.3f} vs {_describe(spec['b'])} {b.mean():.3f} "
                   f"({diff:+.3f}; {test})")
