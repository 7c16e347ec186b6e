"""Defense tuning: the weakest strength at which an attack falls to the adversary's prior (``vflpriv tune``).

A strength s *suffices* when its own paired test of (attack accuracy - prior accuracy) over its seeds
(``tradeoff.leakage.leakage_test``, the tolerance as its margin) shows the leakage below the tolerance: verdict "no"
(or "attack failed", below minus the tolerance); a mean within it is no test (review fe F2). Assuming protection
grows with strength, bisection finds the boundary on a log scale of the defense's axis (linear for a bounded
percentile axis), in the protecting direction (for label DP a smaller epsilon): the strongest end is evaluated
first (if it does not suffice, nothing in range does), then the weakest (if it suffices, it is the answer, flagged
``at_weakest_end``: nothing weaker was tried, so a weaker strength, or none, may suffice too), then ``steps``
midpoints. Strengths are rounded to three significant digits, so every point is a plain store key: a rerun
finds them all and resumes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import pandas as pd

from vflpriv.tradeoff.leakage import FALLEN, leakage_test


@dataclass(frozen=True)
class TunePoint:
    strength: float
    leakage: float
    attack_accuracy: float
    prior_accuracy: float
    utility: float
    utility_std: float
    seeds: int
    suffices: bool
    verdict: str = ""


@dataclass
class TuneResult:
    axis: str
    tolerance: float
    search: tuple[float, float]
    found: TunePoint | None
    points: list[TunePoint] = field(default_factory=list)
    runs: int = 0
    #: ``found`` is the searched range's weakest end: nothing weaker was tried (review hunt2 N10).
    at_weakest_end: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def _point(strength: float, records: pd.DataFrame, tolerance: float) -> TunePoint:
    ok = records[records["status"] == "ok"]
    if ok.empty:
        errors = "; ".join(sorted(set(records["error"])))
        raise RuntimeError(f"every run at strength {strength:g} failed: {errors}")
    leak = float((ok["attack_accuracy"] - ok["prior_accuracy"]).mean())
    verdict = leakage_test(records, margin=tolerance).verdict
    return TunePoint(strength, leak, float(ok["attack_accuracy"].mean()), float(ok["prior_accuracy"].mean()),
                     float(ok["utility"].mean()), float(ok["utility"].std(ddof=0)), len(ok), verdict in FALLEN, verdict)


def _strength(u: float, low: float, high: float, *, log: bool, stronger_is_lower: bool) -> float:
    """The strength at protection level u in [0, 1] (0 weakest), to three significant digits."""
    a, b = (high, low) if stronger_is_lower else (low, high)
    value = a * (b / a) ** u if log else a + (b - a) * u
    return float(f"{value:.3g}")


def tune(
    evaluate: Callable[[float], pd.DataFrame], *, axis: str, stronger_is_lower: bool, low: float, high: float,
    log: bool, tolerance: float, steps: int,
) -> TuneResult:
    """Bisect for the weakest sufficient strength; ``evaluate(s)`` returns the records of every seed at s."""
    result = TuneResult(axis, tolerance, (low, high), None)
    seen: dict[float, TunePoint] = {}

    def at(u: float) -> TunePoint:
        s = _strength(u, low, high, log=log, stronger_is_lower=stronger_is_lower)
        if s not in seen:
            records = evaluate(s)
            result.runs += len(records)
            seen[s] = _point(s, records, tolerance)
            result.points.append(seen[s])
        return seen[s]

    strongest = at(1.0)
    if not strongest.suffices:
        return result
    if at(0.0).suffices:
        result.found = seen[_strength(0.0, low, high, log=log, stronger_is_lower=stronger_is_lower)]
        result.at_weakest_end = True
        return result
    lo, hi = 0.0, 1.0
    for _ in range(steps):
        mid = (lo + hi) / 2
        if at(mid).suffices:
            hi = mid
        else:
            lo = mid
        if math.isclose(*(_strength(u, low, high, log=log, stronger_is_lower=stronger_is_lower) for u in (lo, hi))):
            break
    result.found = at(hi)
    return result


def found_text(result: TuneResult, *, attack: str, stronger_is_lower: bool) -> str:
    """What ``result.found`` shows: the weakest strength searched that suffices, and where it is the range's weakest
    end, that nothing weaker was tried (the end sufficing says nothing of what is below it)."""
    f = result.found
    assert f is not None
    text = (f"weakest {result.axis} searched whose paired test shows {attack} within {result.tolerance:g} of the "
            f"prior: {f.strength:g} (leakage {f.leakage:+.3f})")
    if result.at_weakest_end:
        text += (f", the searched range's weakest end: none weaker was tried, and a weaker {result.axis} or no "
                 f"defense may suffice too ({'raise --high' if stronger_is_lower else 'lower --low'}, or compare with "
                 "--defense none)")
    return text
