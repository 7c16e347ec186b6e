"""The canary audit's test of a claim: the better of Steinke et al.'s bound (:mod:`vflpriv.common.empirical_epsilon`)
and Mahloujifar et al.'s f-DP one-run bound (:mod:`vflpriv.common.fdp_one_run`) on the same menu of counts, each
computed by its own module; this one only decides how the two combine, so that their better is still a 95% bound.

Why the better of two valid bounds needs an argument. Each is a 95% lower bound, P[L_i > epsilon] <= alpha for a true
epsilon; the larger of the two exceeds it on the union of the two rejection regions, which can hold up to 2 alpha,
unless one region holds the other.

- delta = 0 (a pure claim): the f-DP test's rejection region lies inside Steinke et al.'s, so the better of the two
  is Steinke et al.'s and no correction applies. Proof: exact C-ary randomised response at epsilon on every canary,
  with an adversary that guesses a fixed set of k canaries by its outputs, is epsilon-label-DP and makes the right
  guesses T ~ Binomial(k, q), q = e^eps / (e^eps + C - 1). Where the f-DP recursion rejects (epsilon, 0) at level a
  with v of k right, its theorem gives P[T >= v] <= a for every epsilon-DP mechanism, this one included: P[Binomial(k,
  q) >= v] <= a, which is Steinke et al.'s p-value at delta 0 (``empirical_epsilon.p_value``), so that test rejects
  too (at the boundary, where the tail equals a, up to the strict inequality). Entry by entry, hence menu by menu.
- delta > 0: Steinke et al.'s p-value carries the delta * c * m term, which no mechanism need attain, so the argument
  fails and neither region holds the other (the f-DP bound has no such term and wins with many canaries). Both run
  at alpha / 2 (Bonferroni over the two tests): the better of the two bounds, each at alpha / 2, is a 95% bound, and
  the combined p-value is twice the smaller of the two.

:data:`SHARES` of the level therefore go to each test: 1 at delta 0 (Steinke et al.'s alone decides), 2 above it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

from vflpriv.common import empirical_epsilon, fdp_one_run
from vflpriv.common.empirical_epsilon import ALPHA, KEEP

#: The names of the two tests, as records and reports print them.
STEINKE, FDP = "Steinke", "f-DP"


def shares(delta: float) -> int:
    """How many tests split the level: 1 for a pure claim (the f-DP test never rejects more), 2 at delta > 0."""
    return 1 if delta == 0 else 2


class Bound(NamedTuple):
    """The better bound of a menu of counts: epsilon, the guesses of the menu entry it comes from, and its test."""

    epsilon: float
    guesses: int
    test: str


def menu_lower(counts: Sequence[Sequence[int]], *, canaries: int, classes: int, delta: float,
               alpha: float = ALPHA) -> Bound:
    """The better of the two menu bounds at ``delta``, each at alpha / :func:`shares` (Bonferroni over the tests, over
    the menu inside each); Steinke et al.'s on a tie."""
    level = alpha / shares(delta)
    steinke, guesses = empirical_epsilon.menu_lower(counts, canaries=canaries, classes=classes, delta=delta,
                                                    alpha=level)
    best = Bound(steinke, guesses, STEINKE)
    if delta > 0:
        fdp, fdp_guesses = fdp_one_run.menu_epsilon(counts, canaries=canaries, delta=delta, classes=classes,
                                                    alpha=level)
        if fdp > steinke:
            best = Bound(fdp, fdp_guesses, FDP)
    return best


def menu_p_value(counts: Sequence[Sequence[int]], *, canaries: int, classes: int, epsilon: float,
                 delta: float) -> tuple[float, tuple[int, int], str]:
    """The combined p-value of "(epsilon, delta)-label-DP": :func:`shares` times the smaller of the two tests' menu
    p-values (at most 1), with the (guesses, right) entry and the test it comes from. Below a level exactly where
    :func:`menu_lower` at that level exceeds epsilon (the f-DP p-value is rounded up by at most 1%)."""
    p, entry = empirical_epsilon.menu_p_value(counts, canaries=canaries, classes=classes, epsilon=epsilon,
                                              delta=delta)
    best = (p, entry, STEINKE)
    if delta > 0:
        fdp, fdp_entry = fdp_one_run.menu_p_value(counts, canaries=canaries, classes=classes, epsilon=epsilon,
                                                  delta=delta)
        if fdp < p:
            best = (fdp, fdp_entry, FDP)
    return min(1.0, best[0] * shares(delta)), best[1], best[2]


@functools.lru_cache(maxsize=4096)
def cap(*, canaries: int, classes: int, menu: int = len(KEEP), attacks: int = 1, delta: float = 0.0,
        alpha: float = ALPHA) -> float:
    """The largest bound ``canaries`` canaries can certify when every one is guessed right, each of ``attacks``
    attacks at alpha / attacks with a menu of ``menu`` entries, the better of the two tests at their shares: the level
    :func:`menu_lower` and the worst case use. A claim at or above it is untestable with these canaries."""
    if canaries <= 0:
        return 0.0
    steinke = empirical_epsilon.cap(canaries=canaries, classes=classes, menu=menu, attacks=attacks * shares(delta),
                                    delta=delta, alpha=alpha)
    if delta == 0:
        return steinke
    level = alpha / (max(menu, 1) * max(attacks, 1) * shares(delta))
    return max(steinke, fdp_one_run.epsilon_lower(guesses=canaries, right=canaries, canaries=canaries, delta=delta,
                                                  classes=classes, alpha=level))


#: The most canaries :func:`canaries_needed` considers (pooled over the seeds).
MAX_CANARIES = 1_000_000


@functools.lru_cache(maxsize=256)
def canaries_needed(claim: float, *, classes: int, menu: int = len(KEEP), attacks: int = 1, delta: float = 0.0,
                    alpha: float = ALPHA) -> int:
    """The fewest canaries (pooled over the seeds) whose :func:`cap` exceeds ``claim``: below them no outcome can
    reject it. Found by doubling, then bisection (the cap grows with the count: Steinke et al.'s falls past a peak at
    delta > 0, from its delta * C * m term, but the f-DP bound has none); past MAX_CANARIES, or where the cap fell
    from one doubling to the next, ValueError."""
    def ceiling(m: int) -> float:
        return cap(canaries=m, classes=classes, menu=menu, attacks=attacks, delta=delta, alpha=alpha)

    def enough(m: int) -> bool:
        return ceiling(m) > claim

    high = 1
    while not enough(high):
        fell = high > 1 and ceiling(high) < ceiling(high // 2)
        if high >= MAX_CANARIES or fell:
            raise ValueError(f"no count of canaries can test a claim of {claim:g}: their cap peaks below it (at "
                             f"{max(ceiling(high), ceiling(high // 2)):.2f}) and falls beyond" if fell else
                             f"no count of canaries up to {MAX_CANARIES} can test a claim of {claim:g} (their cap "
                             f"reaches {ceiling(high):.2f} there)")
        high *= 2
    low = high // 2  # not enough (or 0)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    return high
