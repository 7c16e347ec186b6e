"""An empirical lower bound on a training's label-DP epsilon from an attack's guesses of random-label canaries.

The game (Steinke, Nasr & Jagielski 2023, "Privacy Auditing with One (1) Training Run", generalised from membership
bits to C-ary labels): m canaries are training samples whose labels are drawn uniformly from the C classes,
independently of everything else; the adversary, from its view of one training, guesses the labels of r of them (it
may abstain on the others) and v guesses are right.

Neighbouring relation: two label vectors that differ in one sample's label (label DP). Under epsilon-label-DP, given
the transcript and every other canary's label, the posterior probability of any one value of a canary's label is at
most q = e^eps / (e^eps + C - 1): its C likelihoods are within a factor e^eps of each other and its prior is uniform.
The guesses are a post-processing of the transcript, so guess by guess, whatever was guessed and found before, a
guess is right with conditional probability at most q, and the number right among r guesses is stochastically
dominated by Binomial(r, q) (Steinke et al.'s Theorem 3.1 argument, which needs no independence between the guesses
of one training). The p-value of "the training is epsilon-label-DP" is then P[Binomial(r, q) >= v].

For an (epsilon, delta) claim the p-value gains Steinke et al.'s delta term (their Theorem 5.2): + delta * c * m *
max_{1 <= i <= v} P[v - i <= Binomial(r, q) < v] / i, with c = 2 in their binary game. For C > 2 vflpriv uses c = C,
a conservative choice, not a new theorem: their term charges each canary the delta slack it can add to one right
guess, and a C-ary canary's slack is at most delta. Proof: let a_y = P[guess = y | label y] and b_y(y') = P[guess = y
| label y'] for a post-processing guess; (epsilon, delta)-label-DP gives a_y <= e^eps b_y(y') + delta for y' != y;
averaging over the C - 1 values y' and summing over y, with sum_{y != y'} b_y(y') = 1 - a_{y'}, gives
A (1 + e^eps / (C - 1)) <= C e^eps / (C - 1) + C delta for A = sum_y a_y, so the uniform label is guessed right with
probability A / C <= q + (C - 1) delta / (e^eps + C - 1) < q + delta. The slack is below the binary game's (c = 2
charges 2 delta per canary there), so charging C delta >= 2 delta scales their term up, never down; we have not
re-derived Theorem 5.2 for C-ary labels, which would charge less. For C = 2 it is theirs exactly.

The lower bound is the largest epsilon rejected at the 5% level (bisection on the p-value, which grows with
epsilon): "the training is not epsilon-label-DP for any epsilon below it, with 95% confidence". An attack that
abstains picks its most confident guesses; which k it keeps is chosen from a fixed menu (every canary, the most
confident half, quarter and tenth), and the bound is Bonferroni-corrected over that menu, so picking the best k on the
canaries' labels cannot inflate it. It is a lower bound: a weak attack certifies little, so the worst case over
attacks is what to report, and the number of canaries caps it: :func:`cap` is the largest bound any attack could
certify with every canary guessed right, at the level the report really uses (the menu's and the attacks' Bonferroni
shares; 100 binary canaries at 5% alone certify at most 3.5, 1000 at most 5.8; with the four-entry menu, 3.11 and
5.43). A claim at or above the cap cannot be rejected by any outcome: it is untestable with those canaries.
A claim is tested with this bound at delta 0 and with the f-DP one below at delta > 0, one test chosen by delta
before any data, at the full level (:mod:`vflpriv.common.canary_bound`, which argues the choice), and its cap and the
canaries a claim needs are that module's.

:mod:`vflpriv.common.fdp_one_run` gives Mahloujifar et al.'s f-DP one-run bounds beside this one, for binary canaries
(``partition.canary_labels: pair``) and C-ary ones (their reconstruction game, whose per-canary constraint gives the
same q and the same per-guess slack as above): the same (epsilon, delta) statement without the delta * m term, and a
bound on mu-GDP, which tests a Gaussian mechanism's whole curve.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

from vflpriv.common import bound_args
from vflpriv.common.lazy import Lazy

binom = Lazy("scipy.stats", "binom")  # imported at the first p-value

#: The confidence level of every bound (a one-sided 95% lower bound).
ALPHA = 0.05
#: Shares of the guessed canaries an abstaining attack may keep (its most confident ones), fixed before scoring.
KEEP = (1.0, 0.5, 0.25, 0.1)
#: A finer menu for audits that pool tens of thousands of canaries (an auditor's ``menu: fine``): KEEP plus the most
#: confident 3% and 1%. With KEEP the most confident tenth caps what any test can certify whatever the count (a perfect
#: test of the pair game at a claim of 2 (mu 0.464): about 0.93 from 3e4 to 1e6 canaries, its tenth about 72% right);
#: the finer entries pay a Bonferroni factor 6/4 at small counts for a reach that grows with the count.
FINE_KEEP = (*KEEP, 0.03, 0.01)
#: The largest epsilon the bisection considers (beyond it every count's p-value is below any level used here).
EPS_MAX = 64.0


def right_guess_bound(epsilon: float, classes: int) -> float:
    """q = e^eps / (e^eps + C - 1): the most an epsilon-label-DP training lets one guess of a uniform label be right."""
    return 1.0 / (1.0 + (classes - 1) * math.exp(-epsilon))


def p_value(*, guesses: int, right: int, canaries: int, classes: int, epsilon: float, delta: float = 0.0) -> float:
    """P-value of "the training is (epsilon, delta)-label-DP" given ``right`` of ``guesses`` guesses were right (of
    ``canaries`` canaries, the delta term's m)."""
    bound_args.counts(guesses=guesses, right=right, canaries=canaries)
    bound_args.classes(classes)
    bound_args.epsilon(epsilon)
    bound_args.delta(delta)
    q = right_guess_bound(epsilon, classes)
    tail = float(binom.sf(right - 1, guesses, q))  # P[Binomial(guesses, q) >= right]
    if delta == 0.0 or right == 0:
        return min(tail, 1.0)
    below = binom.pmf(range(right - 1, -1, -1), guesses, q).cumsum()  # P[right - i <= B < right], i = 1..right
    shift = float((below / range(1, right + 1)).max())
    return min(tail + delta * max(2, classes) * canaries * shift, 1.0)


@functools.lru_cache(maxsize=65536)
def epsilon_lower(*, guesses: int, right: int, canaries: int, classes: int, delta: float = 0.0,
                  alpha: float = ALPHA) -> float:
    """The largest epsilon whose (epsilon, delta)-label-DP is rejected at level ``alpha`` (0 where none is); cached,
    a pure function of its numbers (a table's settings repeat counts: 60 bisection steps each)."""
    bound_args.alpha(alpha)

    def rejected(eps: float) -> bool:
        return p_value(guesses=guesses, right=right, canaries=canaries, classes=classes, epsilon=eps,
                       delta=delta) < alpha

    if not rejected(0.0):
        return 0.0
    low, high = 0.0, EPS_MAX
    if rejected(high):
        return high
    for _ in range(60):  # p grows with epsilon: keep rejected(low), not rejected(high)
        mid = (low + high) / 2
        low, high = (mid, high) if rejected(mid) else (low, mid)
    return low


def kept(guessed: int, *, shares: tuple[float, ...] = KEEP) -> list[int]:
    """How many of ``guessed`` guesses each entry of the menu ``shares`` (:data:`KEEP` or :data:`FINE_KEEP`) keeps
    (at least one; repeats dropped)."""
    bound_args.count("guessed", guessed)
    out: list[int] = []
    for share in shares:
        k = max(1, math.ceil(share * guessed))
        if k not in out:
            out.append(k)
    return out if guessed else []


def menu_p_value(counts: Sequence[Sequence[int]], *, canaries: int, classes: int, epsilon: float,
                 delta: float = 0.0) -> tuple[float, tuple[int, int]]:
    """The menu's p-value of "(epsilon, delta)-label-DP", Bonferroni-corrected over its entries (the smallest entry's
    p-value times the menu's size, at most 1), and the (guesses, right) entry it comes from; (1, (0, 0)) without
    counts. It is below alpha exactly where :func:`menu_lower` at alpha exceeds epsilon."""
    bound_args.epsilon(epsilon)
    best = (1.0, (0, 0))
    for guesses, right in counts:
        p = p_value(guesses=guesses, right=right, canaries=canaries, classes=classes, epsilon=epsilon, delta=delta)
        best = min(best, (min(1.0, p * len(counts)), (int(guesses), int(right))))
    return best


@functools.lru_cache(maxsize=4096)
def cap(*, canaries: int, classes: int, menu: int = len(KEEP), attacks: int = 1, delta: float = 0.0,
        alpha: float = ALPHA) -> float:
    """The largest empirical epsilon ``canaries`` canaries can certify when every one is guessed and every guess is
    right, each of ``attacks`` attacks at alpha / attacks with a menu of ``menu`` entries (Bonferroni over both: the
    level :func:`menu_lower` and the worst case use). A claim at or above it is untestable with these canaries."""
    bound_args.cap(canaries=canaries, classes=classes, menu=menu, attacks=attacks, alpha=alpha)
    bound_args.delta(delta)
    if canaries == 0:
        return 0.0
    return epsilon_lower(guesses=canaries, right=canaries, canaries=canaries, classes=classes, delta=delta,
                         alpha=alpha / (menu * attacks))


def claim_text(epsilon: float, delta: float) -> str:
    """``epsilon 5.38 at delta 1e-05``, or ``epsilon 2.00 (pure)``: every printed epsilon says its delta (a claim of
    10^4 or more in three digits: ``epsilon 6.6e+18``)."""
    value = f"{epsilon:.2f}" if abs(epsilon) < 1e4 else f"{epsilon:.3g}"
    return f"epsilon {value} " + (f"at delta {delta:.3g}" if delta > 0 else "(pure)")


def menu_lower(counts: Sequence[Sequence[int]], *, canaries: int, classes: int, delta: float = 0.0,
               alpha: float = ALPHA) -> tuple[float, int]:
    """The best bound over a menu of (kept guesses, right) counts, each at the Bonferroni level alpha / len(counts),
    and its guesses: (epsilon_lower, guesses); (0, 0) without counts. The menu must be fixed before the guesses are
    scored (:func:`kept`, or every guess alone)."""
    best = (0.0, 0)
    level = alpha / max(len(counts), 1)
    for guesses, right in counts:
        bound = epsilon_lower(guesses=guesses, right=right, canaries=canaries, classes=classes, delta=delta,
                              alpha=level)
        best = max(best, (bound, guesses))
    return best
