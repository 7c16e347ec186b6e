"""The f-DP one-run bound for canaries with k candidates (``vflpriv.common.fdp_one_run``, ``classes``): with two it
is the binary recursion; on exact k-ary randomised response it rejects a true claim at most at its level and a too-weak
one almost always; on simulated Gaussian canaries at the simplex it never exceeds the true mu more often than its
level; at huge noise it certifies about nothing; with every guess right at delta 0 it is the exact C-ary test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from vflpriv.common import empirical_epsilon, fdp_one_run
from vflpriv.common.empirical_epsilon import kept


def _binary_reference(inverse, *, guesses: int, right: int, canaries: int, alpha: float = 0.05) -> bool:
    """The binary recursion as the module's docstring states it (h' = max(h, fbar^-1(r)); no early exit)."""
    if right == 0:
        return False
    r, h = alpha * right / canaries, alpha * (guesses - right) / canaries
    for i in range(right - 1, -1, -1):
        lifted = max(h, inverse(r))
        r, h = min(1.0, r + i / (guesses - i) * (lifted - h)), lifted
    return r + h > guesses / canaries


@pytest.mark.parametrize("delta", [0.0, 1e-5])
def test_with_two_candidates_it_is_the_binary_recursion(delta):
    """classes=2 rejects exactly where the paper's binary recursion does, on a grid of counts and epsilons (and the
    GDP family), and the default is classes=2."""
    grid = [(m, g, v) for m in (20, 100) for g in (m // 2, m) for v in range(g // 2, g + 1, max(1, g // 10))]
    for eps in (0.3, 1.0, 2.5):
        for inverse in (fdp_one_run.inverse_eps_delta(eps, delta), fdp_one_run.inverse_gdp(eps / 2)):
            for m, g, v in grid:
                ours = fdp_one_run.rejects(inverse, guesses=g, right=v, canaries=m, classes=2)
                assert ours == _binary_reference(inverse, guesses=g, right=v, canaries=m), (eps, m, g, v)
    assert fdp_one_run.epsilon_lower(guesses=100, right=80, canaries=100, delta=delta) == fdp_one_run.epsilon_lower(
        guesses=100, right=80, canaries=100, delta=delta, classes=2) > 0


def _first_rejecting(epsilon: float, *, classes: int, m: int) -> int:
    inverse = fdp_one_run.inverse_eps_delta(epsilon, 0.0)
    return next((v for v in range(m + 1) if fdp_one_run.rejects(inverse, guesses=m, right=v, canaries=m,
                                                                  classes=classes)), m + 1)


@pytest.mark.parametrize(("classes", "epsilon"), [(3, 1.0), (10, 1.0), (10, 2.0), (10, 4.0)])
def test_on_exact_k_ary_randomised_response_a_true_claim_is_rejected_at_most_at_the_level(classes, epsilon):
    """k-ary epsilon-RR on 300 canaries, every one guessed as released: T ~ Binomial(300, e^eps / (e^eps + k - 1))
    exactly, the worst case of epsilon-DP for a k-ary secret. The chance of rejecting "epsilon-DP" is <= 5% (sound) and
    the rejection starts within two counts of the exact binomial test's (sharp); a curve half as strong as the truth
    (epsilon / 2) is rejected in >= 95% of runs."""
    m = 300
    q = 1 / (1 + (classes - 1) * math.exp(-epsilon))
    tail = stats.binom.sf(np.arange(m + 2) - 1, m, q)  # P[T >= v], v = 0..m+1
    first = _first_rejecting(epsilon, classes=classes, m=m)
    assert tail[first] <= 0.05
    assert first <= int(np.argmax(tail <= 0.05)) + 2
    assert tail[_first_rejecting(epsilon / 2, classes=classes, m=m)] >= 0.95


def _simplex_run(mu: float, m: int, rng: np.random.Generator, classes: int = 10) -> list[list[int]]:
    """One run of a Gaussian mechanism on m k-ary canaries: each canary releases its label's vertex of the regular
    simplex, scaled so two vertices are mu apart, plus N(0, I); every pair of labels is exactly mu-GDP. A perfect
    guesser (the nearest vertex, its margin as confidence): the menu's (kept, right) counts."""
    vertices = np.eye(classes) - 1 / classes
    vertices *= mu / math.sqrt(2)  # |e_s - e_t| = sqrt 2
    labels = rng.integers(0, classes, m)
    scores = (vertices[labels] + rng.standard_normal((m, classes))) @ vertices.T - 0.5 * (vertices**2).sum(1)
    top = np.sort(scores, axis=1)
    right = (scores.argmax(1) == labels)[np.argsort(-(top[:, -1] - top[:, -2]), kind="stable")]
    return [[k, int(right[:k].sum())] for k in kept(m)]


def test_on_simulated_gaussian_simplex_canaries_the_bounds_exceed_the_truth_at_most_at_the_level():
    """100 runs of 300 ten-class canaries at mu 2 (pairwise exactly mu-GDP): the bound on mu exceeds 2, and the
    epsilon bound the mechanism's pairwise epsilon at delta 1e-5, in at most 5% of runs (<= 12 of 100, the
    binomial's 99.9% quantile at rate 5%); a curve four times weaker than the truth (mu 0.5) is rejected in at least
    90 of them (the bound has power, though for k > 2 it sits well below the truth: about 0.93 here)."""
    rng, mu, delta = np.random.default_rng(11), 2.0, 1e-5
    true_epsilon = fdp_one_run.gdp_epsilon(mu, delta)
    over_mu = over_eps = weak = 0
    for _ in range(100):
        counts = _simplex_run(mu, 300, rng)
        eps, mu_hat, _ = fdp_one_run.menu_lower(counts, canaries=300, delta=delta, classes=10)
        over_mu, over_eps, weak = over_mu + (mu_hat > mu), over_eps + (eps > true_epsilon), weak + (mu_hat > 0.5)
    assert over_mu <= 12 and over_eps <= 12
    assert weak >= 90


def test_it_certifies_about_nothing_at_huge_noise():
    """Ten-class canaries at mu 1e-3 (sigma about 1e3 relative to the candidates' distance): over 40 runs of 990
    canaries both bounds stay near 0."""
    rng = np.random.default_rng(5)
    bounds = [fdp_one_run.menu_lower(_simplex_run(1e-3, 990, rng), canaries=990, delta=1e-5, classes=10)
              for _ in range(40)]
    assert max(b[0] for b in bounds) < 0.3 and max(b[1] for b in bounds) < 0.15
    assert np.mean([b[0] for b in bounds]) < 0.05


@pytest.mark.parametrize("classes", [3, 10])
@pytest.mark.parametrize("m", [50, 330, 990])
def test_every_guess_right_and_pure_it_is_the_exact_c_ary_test(classes, m):
    """m k-ary canaries, all guessed right, delta 0: the bound is the largest eps with q^m < alpha, q = e^eps /
    (e^eps + k - 1), which is also Steinke et al.'s C-ary bound (the exact test here: never stronger than it, and
    not weaker); at delta 1e-5 it charges no delta * m term, so it is not below Steinke et al.'s."""
    ours = fdp_one_run.epsilon_lower(guesses=m, right=m, canaries=m, delta=0.0, classes=classes)
    exact = math.log((classes - 1) / (0.05 ** (-1 / m) - 1))
    theirs = empirical_epsilon.epsilon_lower(guesses=m, right=m, canaries=m, classes=classes)
    assert ours == pytest.approx(exact, abs=1e-6) and theirs == pytest.approx(exact, abs=1e-6)
    approximate = fdp_one_run.epsilon_lower(guesses=m, right=m, canaries=m, delta=1e-5, classes=classes)
    assert approximate >= empirical_epsilon.epsilon_lower(guesses=m, right=m, canaries=m, classes=classes, delta=1e-5)


def test_fewer_than_two_candidates_is_refused():
    with pytest.raises(ValueError, match="at least 2 candidates"):
        fdp_one_run.rejects(fdp_one_run.inverse_gdp(1.0), guesses=5, right=5, canaries=5, classes=1)
