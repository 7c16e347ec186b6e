"""An empirical lower bound from canaries by f-DP auditing in one run (Mahloujifar, Melis & Chaudhuri 2024,
"Auditing f-Differential Privacy in One Run", arXiv 2410.22235, ICML 2025), for binary canaries and for canaries with
k candidates (their reconstruction game; below). It tests a whole trade-off curve: against
the (epsilon, delta) curve it certifies about what Steinke et al.'s test does (the same with every guess right at
delta 0, without their delta * m term, a few percent lower with abstention); against a Gaussian (GDP) curve it
certifies a mu, which tests the mechanism's whole profile where a point (epsilon, delta) test cannot.

The game. m canaries, each with a secret bit drawn uniformly and independently (here: a canary's label is one of a
public pair of classes); one run of the mechanism; the adversary sees the output and makes k guesses of bits (it
abstains on the others); T of them are right. The neighbouring relation is the mechanism's (label DP: one canary's
label changed, a <-> b); the hypothesis H0 is "the mechanism is f-DP" for a symmetric trade-off function f.

The theorem (their one-run bound for f-DP in the guessing game, the recursion over the masses of right and wrong
guesses r and h; stated here as implemented, without their equation numbers, which we could not check). Write
fbar(x) = 1 - f(x) and fbar^-1(r) = min {x : fbar(x) >= r}. Start from r = alpha v / m, h = alpha (k - v) / m and for
i = v - 1, ..., 0 set h' = max(h, fbar^-1(r)), r = min(1, r + i / (k - i) (h' - h)), h = h'. If r + h > k / m at the
end, then under H0 P[T >= v] <= alpha: H0 is rejected at level alpha by v right of k guesses.

The argument (ours, in their terms). (1) Per canary j, fix every other bit: a guess of bit j made on an event that is
a post-processing of the output (and of the other bits, which are fixed) is a test of S_j = 0 against S_j = 1, so its
rates obey f: averaging over the uniform bit and using the concavity of fbar, P[right] <= fbar(P[wrong]). (2) The
events "the guess of j is made and T_{-j} >= i - 1" are such post-processings (T_{-j}, the right guesses of the other
canaries, is a function of the output and the other bits). When the guess of j is right T = T_{-j} + 1, when wrong
T = T_{-j}; so summing (1) over the canaries, r_i <= fbar(h_{i-1}) with r_i = E[T 1{T >= i}] / m and
h_i = E[(k - T) 1{T >= i}] / m (fbar is concave, so the average of the canaries' bounds is below fbar of the
average). (3) If P[T >= v] > alpha, the mass above v makes r_v and h_v at least the start values (the least total
is when that mass sits at T = v); each level i below v must then hold enough wrong guesses to make h_i >= fbar^-1
(r_{i+1}), and the least mass that does it sits at level i, adding i / (k - i) right guesses per wrong one: the
recursion computes the least total r_0 + h_0 any such distribution of T can have (that putting the mass at T = v
and each level's deficit at that level is the least is their lemma; checked here on small games: the recursion's
smallest rejecting alpha equals the largest P[T >= v] that numerical optimisation finds over every distribution of T
meeting (2)'s constraints). The total is
E[T + (k - T)] / m = k / m, so a least total above it is impossible: P[T >= v] <= alpha. Checked here
(``tests/audit/test_fdp_one_run.py``): on exact randomised response it rejects only where the binomial tail is <= alpha
and within two counts of the exact test; on simulated exact Gaussian mechanisms it exceeds the true mu or epsilon in
at most alpha of the runs; with every guess right and delta 0 it is Steinke et al.'s bound exactly. Assumptions: the
bits are independent and uniform (drawn from the canary key's stream, never seen by the adversary), the guesses
depend on the output only, k is fixed before the guesses are scored (the menu, Bonferroni over its entries), f is
symmetric (both families here are).

c candidates (their reconstruction game, "k" there; c here, since k counts the guesses above: each canary's secret is
one of c values drawn uniformly, here a ten-class canary's label, c = C = 10; the adversary guesses one value or
abstains). The recursion is the same with fbar^-1(r) replaced by (c - 1) fbar^-1(r): h' = max(h, (c - 1) fbar^-1(r));
for c = 2 it is the binary one. The per-canary constraint, derived here (we could not read the paper's statement of
it; the factor c - 1 is the one the authors' released analysis, PrivacyGuard's ``FDPAnalysisNode``, applies with c its
"alphabet size"): fix the other canaries' secrets and an event E that is a post-processing of the output and of them;
write x_{s,t} = P_s[guess t and E] (canary j's secret is s). For t != s the region "guess t and E" is a test of s
against t (neighbours: one label changed) with type I error x_{s,t}, so its power P_t[guess t and E] <= fbar(x_{s,t});
averaging over the c - 1 values s != t and then over t (fbar is concave, twice) gives
    r_j <= fbar(h_j / (c - 1)),  r_j = (1/c) sum_t P_t[guess t and E],  h_j = (1/c) sum_t sum_{s != t} x_{s,t},
the chances that the uniform secret is guessed right, and guessed wrong, on E: (1) with fbar(h / (c - 1)) for
fbar(h). For (eps, 0)-DP (fbar(x) = e^eps x near 0) it is r_j <= e^eps h_j / (c - 1): a guess is right with
probability at most e^eps / (e^eps + c - 1), Steinke et al.'s C-ary q (:mod:`vflpriv.common.empirical_epsilon`), met
with equality by exact c-ary randomised response; for (eps, delta), with every guess made, r_j <= q + (c - 1) delta /
(e^eps + c - 1), the slack empirical_epsilon's docstring derives. Steps (2) and (3) use only the constraint's shape
(h_{i-1} >= g(r_i) for an increasing g), so they carry over with g = (c - 1) fbar^-1. Sound, not tight: a c-ary test
may be unable to meet every pair's curve at once (c Gaussian candidates at the simplex cannot), so for c > 2 the bound
can sit well below what the mechanism leaks (its mu most). Checked (``tests/audit/test_fdp_k_candidates.py``): c = 2
is the binary recursion; on exact c-ary randomised response it rejects a true epsilon with probability <= alpha,
within two counts of the exact binomial test; with every guess right at delta 0 it is that exact test.

What each family certifies (the project's rule: a proven bound, or an estimate, labelled):

- f = f_{eps, delta} (the trade-off curve of (eps, delta)-DP, Dong, Roth & Su's f_{eps,delta}:
  max(0, 1 - delta - e^eps x, e^-eps (1 - delta - x))): :func:`epsilon_lower` is the largest eps whose
  (eps, delta)-DP is rejected, an assumption-free lower bound on the mechanism's epsilon at delta, comparable with
  Steinke et al.'s (:mod:`vflpriv.common.empirical_epsilon`) and with any (eps, delta) claim.
- f = G_mu (mu-Gaussian DP, Dong, Roth & Su 2019): :func:`mu_lower` is the largest mu whose mu-GDP is rejected, a
  proven "not mu-GDP for any mu below it", comparable with a GDP claim (a Gaussian mechanism's exact one).
  :func:`gdp_epsilon` of it is an empirical *estimate* of epsilon at delta: "not mu-GDP" does not imply "not
  (eps(mu), delta)-DP", so it holds only under the assumption that the mechanism's curve is a Gaussian one.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

from vflpriv.common import bound_args
from vflpriv.common.empirical_epsilon import ALPHA, EPS_MAX
from vflpriv.common.lazy import Lazy

special = Lazy("scipy.special")  # imported at the first Gaussian curve (ndtr, ndtri: Phi and Phi^-1)

#: The largest exponent math.exp takes without overflow (e^709 is about 8e307).
EXP_MAX = 709.0
#: The largest mu the bisection considers (mu-GDP with mu 40 is as good as no privacy at any count used here).
MU_MAX = 40.0


def inverse_eps_delta(epsilon: float, delta: float) -> Callable[[float], float]:
    """fbar^-1 for f_{eps, delta}: the fewest wrong guesses (as a rate) an (eps, delta)-DP test needs for ``r`` right:
    max(0, (r - delta) e^-eps, 1 - delta - e^eps (1 - r)). e^eps is taken at min(eps, EXP_MAX), the same below it and
    above it where the third term is 1 - delta at r = 1 and far below 0 elsewhere (an overflow otherwise: a claim of
    thousands, dp-gaussian's at a tiny sigma)."""
    grow = math.exp(min(epsilon, EXP_MAX))

    def inverse(r: float) -> float:
        return max(0.0, (r - delta) * math.exp(-epsilon), 1.0 - delta - grow * (1.0 - r))
    return inverse


def inverse_gdp(mu: float) -> Callable[[float], float]:
    """fbar^-1 for G_mu: Phi(Phi^-1(r) - mu)."""
    def inverse(r: float) -> float:
        return 0.0 if r <= 0 else 1.0 if r >= 1 else float(special.ndtr(special.ndtri(r) - mu))
    return inverse


def rejects(inverse: Callable[[float], float], *, guesses: int, right: int, canaries: int, classes: int = 2,
            alpha: float = ALPHA) -> bool:
    """Whether ``right`` of ``guesses`` guesses (of ``canaries`` canaries with ``classes`` uniform candidates each)
    reject "f-DP" at level ``alpha``, f given by its ``inverse`` fbar^-1 (the module's recursion)."""
    bound_args.counts(guesses=guesses, right=right, canaries=canaries)
    bound_args.classes(classes)
    bound_args.alpha(alpha)
    if right == 0:
        return False
    r, h = alpha * right / canaries, alpha * (guesses - right) / canaries
    for i in range(right - 1, -1, -1):
        lifted = max(h, (classes - 1) * inverse(r))
        if lifted == h:  # no level below needs more wrong guesses: r and h stay
            break
        r, h = min(1.0, r + i / (guesses - i) * (lifted - h)), lifted
    return r + h > guesses / canaries


def _largest(rejected: Callable[[float], bool], high: float) -> float:
    """The largest parameter in [0, high] that ``rejected`` (monotone: true below a point) holds for, by bisection."""
    if not rejected(0.0):
        return 0.0
    if rejected(high):
        return high
    low = 0.0
    for _ in range(50):
        mid = (low + high) / 2
        low, high = (mid, high) if rejected(mid) else (low, mid)
    return low


@functools.lru_cache(maxsize=4096)
def epsilon_lower(*, guesses: int, right: int, canaries: int, delta: float, classes: int = 2,
                  alpha: float = ALPHA) -> float:
    """The largest epsilon whose (epsilon, delta)-DP the counts reject at ``alpha`` (0 where none is): a proven lower
    bound at ``delta``."""
    bound_args.delta(delta)
    return _largest(lambda eps: rejects(inverse_eps_delta(eps, delta), guesses=guesses, right=right,
                                        canaries=canaries, classes=classes, alpha=alpha), EPS_MAX)


@functools.lru_cache(maxsize=4096)
def mu_lower(*, guesses: int, right: int, canaries: int, classes: int = 2, alpha: float = ALPHA) -> float:
    """The largest mu whose mu-GDP the counts reject at ``alpha`` (0 where none is)."""
    return _largest(lambda mu: rejects(inverse_gdp(mu), guesses=guesses, right=right, canaries=canaries,
                                       classes=classes, alpha=alpha), MU_MAX)


def gdp_delta(mu: float, epsilon: float) -> float:
    """delta(eps) of mu-GDP (Dong, Roth & Su 2019, Corollary 2.13): Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2).
    The second term is exp(eps + log Phi(-eps/mu - mu/2)), finite at every finite epsilon (e^eps alone overflows above
    709: a claim of thousands, dp-gaussian's at a tiny sigma); at least 0 (the two terms can round past each other)."""
    bound_args.epsilon(mu, name="mu")
    bound_args.epsilon(epsilon)
    if mu <= 0:
        return 0.0
    tail = math.exp(epsilon + float(special.log_ndtr(-epsilon / mu - mu / 2)))
    return max(0.0, float(special.ndtr(-epsilon / mu + mu / 2)) - tail)


def gdp_epsilon(mu: float, delta: float) -> float:
    """The epsilon at ``delta`` of mu-GDP (0 where delta(0) <= ``delta``): for a measured mu, an estimate under the
    Gaussian-curve assumption, never a bound."""
    bound_args.delta(delta)
    if gdp_delta(mu, 0.0) <= delta:
        return 0.0
    low, high = 0.0, EPS_MAX
    for _ in range(60):  # delta(eps) falls with eps
        mid = (low + high) / 2
        low, high = (mid, high) if gdp_delta(mu, mid) > delta else (low, mid)
    return high


def menu_epsilon(counts: Sequence[Sequence[int]], *, canaries: int, delta: float, classes: int = 2,
                 alpha: float = ALPHA) -> tuple[float, int]:
    """Over a menu of (kept guesses, right) counts fixed before scoring, each at alpha / len(counts) (Bonferroni): the
    best epsilon lower bound at ``delta`` and its entry's guesses; (0, 0) without counts."""
    level = alpha / max(len(counts), 1)
    return max(((epsilon_lower(guesses=int(g), right=int(r), canaries=canaries, delta=delta, classes=classes,
                               alpha=level), int(g)) for g, r in counts), default=(0.0, 0))


def menu_lower(counts: Sequence[Sequence[int]], *, canaries: int, delta: float, classes: int = 2,
               alpha: float = ALPHA) -> tuple[float, float, int]:
    """:func:`menu_epsilon` and the best mu lower bound of the same menu at the same level: (epsilon, mu, the guesses
    of the epsilon's entry)."""
    level = alpha / max(len(counts), 1)
    epsilon, guesses = menu_epsilon(counts, canaries=canaries, delta=delta, classes=classes, alpha=alpha)
    mu = max((mu_lower(guesses=int(g), right=int(r), canaries=canaries, classes=classes, alpha=level)
              for g, r in counts), default=0.0)
    return epsilon, mu, guesses


@functools.lru_cache(maxsize=4096)
def p_value(*, guesses: int, right: int, canaries: int, classes: int, epsilon: float, delta: float) -> float:
    """The smallest level at which the counts reject (epsilon, delta)-DP (1 where none does), found by bisection on
    log10 of the level to a factor 1 + 3e-6 and rounded up, so a p-value below a level means the recursion rejects at
    that level (it rejects at every level above one it rejects at: its start values grow with the level); so fine
    that the cap, where the recursion starts to reject, and this p-value agree on claims a 1e-4 below it."""
    bound_args.epsilon(epsilon)
    bound_args.delta(delta)

    def rejected(log_level: float) -> bool:
        return rejects(inverse_eps_delta(epsilon, delta), guesses=guesses, right=right, canaries=canaries,
                       classes=classes, alpha=10.0 ** log_level)

    low, high = -300.0, 0.0
    if not rejected(high):
        return 1.0
    if rejected(low):
        return 10.0 ** low
    while high - low > 1e-6:  # keep rejected(high), not rejected(low)
        mid = (low + high) / 2
        low, high = (low, mid) if rejected(mid) else (mid, high)
    return 10.0 ** high


def menu_p_value(counts: Sequence[Sequence[int]], *, canaries: int, classes: int, epsilon: float,
                 delta: float) -> tuple[float, tuple[int, int]]:
    """The menu's f-DP p-value of "(epsilon, delta)-DP", Bonferroni over its entries (the smallest entry's times the
    menu's size, at most 1), and the (guesses, right) entry it comes from; (1, (0, 0)) without counts."""
    bound_args.epsilon(epsilon)
    best = (1.0, (0, 0))
    for guesses, right in counts:
        p = p_value(guesses=int(guesses), right=int(right), canaries=canaries, classes=classes, epsilon=epsilon,
                    delta=delta)
        best = min(best, (min(1.0, p * len(counts)), (int(guesses), int(right))))
    return best


class FdpBounds(NamedTuple):
    """What canaries' menu of counts certifies: epsilon at delta (proven), mu (proven "not mu-GDP below it")
    and the epsilon at delta of that mu (an estimate under the Gaussian-curve assumption)."""

    epsilon: float
    mu: float
    epsilon_gdp_estimate: float


def fdp_bounds(counts: Sequence[Sequence[int]], *, canaries: int, classes: int, delta: float, alpha: float = ALPHA
               ) -> FdpBounds:
    """:func:`menu_lower`'s two bounds and :func:`gdp_epsilon` of its mu, as the records and the reports carry them
    (binary canaries, ``classes`` 2, and ten-class ones alike)."""
    epsilon, mu, _ = menu_lower(counts, canaries=canaries, delta=delta, classes=classes, alpha=alpha)
    return FdpBounds(epsilon, mu, gdp_epsilon(mu, delta))
