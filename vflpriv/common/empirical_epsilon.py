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
max_{1 <= i <= v} P[v - i <= Binomial(r, q) < v] / i, with c = 2 in their binary game. For C > 2 vflpriv uses c = C:
the term charges each canary the delta mass it can add to a right guess, and one canary's is at most
(C - 1) delta / (e^eps + C - 1) < delta (from P(out | y) <= e^eps P(out | y') + delta over its C equally likely
labels), below the binary game's 2 delta per canary, so c = C >= 2 keeps the term conservative. For C = 2 it is theirs.

The lower bound is the largest epsilon rejected at the 5% level (bisection on the p-value, which grows with
epsilon): "the training is not epsilon-label-DP for any epsilon below it, with 95% confidence". An attack that
abstains picks its most confident guesses; which k it keeps is chosen from a fixed menu (every canary, the most
confident half, quarter and tenth), and the bound is Bonferroni-corrected over that menu, so picking the best k on the
canaries' labels cannot inflate it. It is a lower bound: a weak attack certifies little, so the worst case over
attacks is what to report, and the number of canaries caps it (every guess right: 100 binary canaries certify about
3.5, 1000 about 5.8).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from scipy.stats import binom

#: The confidence level of every bound (a one-sided 95% lower bound).
ALPHA = 0.05
#: Shares of the guessed canaries an abstaining attack may keep (its most confident ones), fixed before scoring.
KEEP = (1.0, 0.5, 0.25, 0.1)
#: The largest epsilon the bisection considers (beyond it every count's p-value is below any level used here).
EPS_MAX = 64.0


def right_guess_bound(epsilon: float, classes: int) -> float:
    """q = e^eps / (e^eps + C - 1): the most an epsilon-label-DP training lets one guess of a uniform label be right."""
    return 1.0 / (1.0 + (classes - 1) * math.exp(-epsilon))


def p_value(*, guesses: int, right: int, canaries: int, classes: int, epsilon: float, delta: float = 0.0) -> float:
    """P-value of "the training is (epsilon, delta)-label-DP" given ``right`` of ``guesses`` guesses were right (of
    ``canaries`` canaries, the delta term's m)."""
    if not 0 <= right <= guesses <= canaries:
        raise ValueError(f"need 0 <= right <= guesses <= canaries, got {right}, {guesses}, {canaries}")
    q = right_guess_bound(epsilon, classes)
    tail = float(binom.sf(right - 1, guesses, q))  # P[Binomial(guesses, q) >= right]
    if delta == 0.0 or right == 0:
        return min(tail, 1.0)
    below = binom.pmf(range(right - 1, -1, -1), guesses, q).cumsum()  # P[right - i <= B < right], i = 1..right
    shift = max(below[i - 1] / i for i in range(1, right + 1))
    return min(tail + delta * max(2, classes) * canaries * float(shift), 1.0)


def epsilon_lower(*, guesses: int, right: int, canaries: int, classes: int, delta: float = 0.0,
                  alpha: float = ALPHA) -> float:
    """The largest epsilon whose (epsilon, delta)-label-DP is rejected at level ``alpha`` (0 where none is)."""
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


def kept(guessed: int) -> list[int]:
    """How many of ``guessed`` guesses each entry of :data:`KEEP` keeps (at least one; repeats dropped)."""
    out: list[int] = []
    for share in KEEP:
        k = max(1, math.ceil(share * guessed))
        if k not in out:
            out.append(k)
    return out if guessed else []


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
