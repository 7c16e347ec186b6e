"""The canary audit's test of a claim: ONE test, chosen by the claim's delta before any data, at the full level (no
Bonferroni over tests): Steinke et al.'s (:mod:`vflpriv.common.empirical_epsilon`) at delta 0, Mahloujifar et al.'s
f-DP one-run test (:mod:`vflpriv.common.fdp_one_run`) at delta > 0, each on the same menu of counts and computed by its
own module. The worst case, the claim test (Holm over claims), the caps and :func:`canaries_needed` all use it.

Why one test, and which. The better of two valid 95% bounds is not a 95% bound (it exceeds the truth on the union of
the two rejection regions); splitting the level (each at alpha / 2) repairs that but costs 0.1-0.16 in epsilon, more
than the better of the two ever gains. The rule depends on delta only, so it is fixed before the guesses are scored:

- delta = 0 (a pure claim): Steinke et al.'s, since the f-DP test's rejection region lies inside theirs (it never
  rejects more). Proof: exact C-ary randomised response at epsilon on every canary, with an adversary that guesses a
  fixed set of k canaries by its outputs, is epsilon-label-DP and makes the right guesses T ~ Binomial(k, q), q =
  e^eps / (e^eps + C - 1). Where the f-DP recursion rejects (epsilon, 0) at level a with v of k right, its theorem
  gives P[T >= v] <= a for every epsilon-DP mechanism, this one included: P[Binomial(k, q) >= v] <= a, which is
  Steinke et al.'s p-value at delta 0 (``empirical_epsilon.p_value``), so that test rejects too (at the boundary,
  where the tail equals a, up to the strict inequality). Entry by entry, hence menu by menu.
- delta > 0: the f-DP test. Steinke et al.'s p-value carries a delta * C * m term that no mechanism need attain, so
  their bound peaks and falls with the canaries; the f-DP bound has no such term. Where Steinke et al.'s bound is the
  larger at the same level it is so by at most 0.008 (52 of 144 (k, v, m, C) cases at delta 1e-5, 5%/4, m 100-1000,
  C 2 and 10, v from 60% to all of k), and the f-DP test alone at the full level is at least the better of the two at
  half the level in all 163 cases of a like grid (m 30-1000): the split never paid. The alternative rule, whichever
  test has the larger all-right cap for (m, C, delta, menu, A), is as sound (also fixed before the data) but gains at
  most that 0.008 and costs Steinke et al.'s delta-term cap (seconds per count at a million canaries).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import NamedTuple

from vflpriv.common import bound_args, empirical_epsilon, fdp_one_run
from vflpriv.common.empirical_epsilon import ALPHA, EPS_MAX, KEEP

#: The names of the two tests, as records and reports print them.
STEINKE, FDP = "Steinke", "f-DP"


def chosen_test(delta: float) -> str:
    """The one test of a claim at ``delta``: Steinke et al.'s for a pure claim, the f-DP one above it (ValueError
    where delta is no number in [0, 1))."""
    bound_args.delta(delta)
    return STEINKE if delta == 0 else FDP


class Bound(NamedTuple):
    """The chosen test's bound of a menu of counts: epsilon, the guesses of the menu entry it comes from, its test."""

    epsilon: float
    guesses: int
    test: str


def menu_lower(counts: Sequence[Sequence[int]], *, canaries: int, classes: int, delta: float,
               alpha: float = ALPHA) -> Bound:
    """The chosen test's menu bound at ``delta`` and ``alpha`` (Bonferroni over the menu inside it)."""
    test = chosen_test(delta)
    module = empirical_epsilon.menu_lower if test == STEINKE else fdp_one_run.menu_epsilon
    epsilon, guesses = module(counts, canaries=canaries, classes=classes, delta=delta, alpha=alpha)
    return Bound(epsilon, guesses, test)


def menu_p_value(counts: Sequence[Sequence[int]], *, canaries: int, classes: int, epsilon: float,
                 delta: float) -> tuple[float, tuple[int, int], str]:
    """The chosen test's menu p-value of "(epsilon, delta)-label-DP", with the (guesses, right) entry it comes from and
    the test's name. Below a level exactly where :func:`menu_lower` at that level exceeds epsilon (the f-DP p-value
    is rounded up, by a factor of at most 1 + 3e-6)."""
    bound_args.epsilon(epsilon)
    test = chosen_test(delta)
    module = empirical_epsilon if test == STEINKE else fdp_one_run
    p, entry = module.menu_p_value(counts, canaries=canaries, classes=classes, epsilon=epsilon, delta=delta)
    return p, entry, test


#: How far below its cap a claim must be to count as testable: the f-DP p-value is found to a factor 1 + 3e-6 and
#: rounded up, so a claim within about 1e-7 of the cap can fail to reject with every guess right; the margin keeps
#: "testable" meaning "every guess right rejects it" (:func:`testable`, :func:`canaries_needed`).
CAP_MARGIN = 1e-4


def testable(claim: float, cap_value: float) -> bool:
    """Whether a claim is testable under a cap: below it by :data:`CAP_MARGIN` (conservative: a claim within the margin
    is called untestable, never tested and missed)."""
    return bool(claim < cap_value - CAP_MARGIN)


@functools.lru_cache(maxsize=4096)
def cap(*, canaries: int, classes: int, menu: int = len(KEEP), attacks: int = 1, delta: float = 0.0,
        alpha: float = ALPHA) -> float:
    """The largest bound ``canaries`` canaries can certify when every one is guessed right, by the chosen test, each
    of ``attacks`` attacks at alpha / attacks with a menu of ``menu`` entries: the level :func:`menu_lower` and the
    worst case use. A claim at or above it is untestable with these canaries."""
    if chosen_test(delta) == STEINKE:
        return empirical_epsilon.cap(canaries=canaries, classes=classes, menu=menu, attacks=attacks, delta=delta,
                                     alpha=alpha)
    bound_args.cap(canaries=canaries, classes=classes, menu=menu, attacks=attacks, alpha=alpha)
    if canaries == 0:
        return 0.0
    level = alpha / (menu * attacks)
    return fdp_one_run.epsilon_lower(guesses=canaries, right=canaries, canaries=canaries, delta=delta,
                                     classes=classes, alpha=level)


def pure_cap(*, canaries: int, classes: int, menu: int = len(KEEP), attacks: int = 1, alpha: float = ALPHA) -> float:
    """The closed-form cap at delta 0, an upper bound of :func:`cap` at every delta: every guess right rejects epsilon
    exactly where q^m < level, q = e^eps / (e^eps + C - 1), so the cap is log((C - 1) / (level^(-1/m) - 1)) (at least
    0, at most EPS_MAX). It bounds the f-DP cap at delta > 0: exact C-ary randomised response at eps is (eps, delta)-DP
    for every delta and makes m fixed guesses all right with probability q^m, so a valid test that rejects (eps, delta)
    with every guess right has q^m <= level, and this test rejects eps too (the step of the delta-0 proof above).
    0 without canaries."""
    bound_args.cap(canaries=canaries, classes=classes, menu=menu, attacks=attacks, alpha=alpha)
    if canaries == 0:
        return 0.0
    level = alpha / (menu * attacks)
    return max(0.0, min(EPS_MAX, math.log((classes - 1) / math.expm1(-math.log(level) / canaries))))


#: The most canaries :func:`canaries_needed` considers (pooled over the seeds).
MAX_CANARIES = 1_000_000


class Untestable(ValueError):
    """No count of canaries up to :data:`MAX_CANARIES` can test the claim (a claim beyond every cap there, not a
    malformed one: :func:`canaries_needed` raises a plain ValueError for those)."""


#: The fewest canaries a run must guess for the abstention menu to hold every entry of KEEP (below, ``kept`` drops
#: repeated entries and the test corrects over fewer).
FULL_MENU_FROM = next(m for m in range(1, 100) if len(empirical_epsilon.kept(m)) == len(KEEP))


@functools.lru_cache(maxsize=256)
def canaries_needed(claim: float, *, classes: int, menu: int | None = None, attacks: int = 1, delta: float = 0.0,
                    alpha: float = ALPHA, seeds: int = 1) -> int:
    """The fewest canaries, pooled over ``seeds`` runs that each guess as many, whose :func:`cap` exceeds ``claim``:
    below them no outcome can reject it. The cap is taken at the menu the claim test uses at each count (``menu``
    None: ``len(kept(n))`` for n a run, as the pooled counts carry it; fewer entries below FULL_MENU_FROM a run,
    where the full menu's correction overstated the count by a canary or two), or at a fixed ``menu``. Below
    FULL_MENU_FROM each count is tried in turn (the menu changes there, so the cap need not grow with the count);
    from it on, doubling then bisection (the chosen test's all-right cap grows with the count at a fixed menu).
    :class:`Untestable` at once where the claim is at or above :func:`pure_cap` at MAX_CANARIES (and at every smaller
    menu tried), which bounds every cap up to there, or where the search finds no count up to there; ValueError where
    an argument is out of range (a NaN, infinite or negative claim; delta outside [0, 1); seeds below 1)."""
    bound_args.epsilon(claim, name="claim")
    bound_args.delta(delta, below_one=True)
    bound_args.count("seeds", seeds, least=1)
    if seeds > MAX_CANARIES:  # one canary a run is already past the most any count may reach
        raise Untestable(f"{seeds} runs plant more than {MAX_CANARIES} canaries at one a run: no count of canaries up "
                         f"to {MAX_CANARIES} can test a claim of {claim:g}")

    def menu_at(n: int) -> int:
        return menu if menu is not None else len(empirical_epsilon.kept(n))

    ceiling = max(pure_cap(canaries=MAX_CANARIES, classes=classes, menu=menu_at(FULL_MENU_FROM), attacks=attacks,
                           alpha=alpha),
                  *(pure_cap(canaries=n * seeds, classes=classes, menu=menu_at(n), attacks=attacks, alpha=alpha)
                    for n in range(1, FULL_MENU_FROM)))
    if not testable(claim, ceiling):
        raise Untestable(f"no count of canaries up to {MAX_CANARIES} can test a claim of {claim:g} (their cap is at "
                         f"most {ceiling:.2f} there)")

    def at(n: int) -> float:
        return cap(canaries=n * seeds, classes=classes, menu=menu_at(n), attacks=attacks, delta=delta, alpha=alpha)

    def enough(n: int) -> bool:
        return testable(claim, at(n))

    small = next((n for n in range(1, FULL_MENU_FROM) if n * seeds <= MAX_CANARIES and enough(n)), None)
    if small is not None:
        return small * seeds
    low, high = FULL_MENU_FROM - 1, FULL_MENU_FROM  # per run; not enough(low)
    while not enough(high):
        if high * seeds >= MAX_CANARIES:  # doubling stops past MAX_CANARIES: the bisection below stays within 2x it
            raise Untestable(f"no count of canaries up to {MAX_CANARIES} can test a claim of {claim:g} (their cap "
                             f"reaches {at(MAX_CANARIES // seeds):.2f} there)")
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid, high)
    if high * seeds > MAX_CANARIES:
        raise Untestable(f"no count of canaries up to {MAX_CANARIES} can test a claim of {claim:g} (their cap "
                         f"reaches {at(MAX_CANARIES // seeds):.2f} there)")
    return high * seeds
