"""The f-DP one-run bound (``vflpriv.common.fdp_one_run``): it never rejects a true claim more often than its level,
on exactly computed and exactly simulated mechanisms; it agrees with Steinke et al.'s bound where both are exact;
it certifies about nothing at huge noise; its GDP epsilon is the curve's own."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from vflpriv.common import empirical_epsilon, fdp_one_run
from vflpriv.common.empirical_epsilon import kept


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0])
def test_against_exact_randomised_response_it_rejects_only_where_the_binomial_tail_is_below_the_level(epsilon):
    """epsilon-RR on 200 bits, every bit guessed: T ~ Binomial(200, e^eps / (1 + e^eps)) exactly, the worst case of
    (epsilon, 0)-DP. The bound may reject "epsilon-DP" only at counts whose tail is <= 5% (sound), and it does from
    at most two counts above the exact critical one (it is as sharp as the exact test here)."""
    m, q = 200, 1 / (1 + math.exp(-epsilon))
    tail = stats.binom.sf(np.arange(m + 1) - 1, m, q)  # P[T >= v]
    critical = int(np.argmax(tail <= 0.05))
    inverse = fdp_one_run.inverse_eps_delta(epsilon, 0.0)
    first = next(v for v in range(m + 1) if fdp_one_run.rejects(inverse, guesses=m, right=v, canaries=m))
    assert critical <= first <= critical + 2


def _simulated(mu: float, m: int, rng: np.random.Generator) -> list[list[int]]:
    """One run of an exact mu-GDP mechanism on m binary canaries (each canary's statistic N(+-mu/2, 1)) and a perfect
    likelihood-ratio guesser: the menu's (kept, right) counts of its most confident guesses."""
    bits = rng.integers(0, 2, m)
    score = (2 * bits - 1) * mu / 2 + rng.standard_normal(m)
    right = ((score > 0) == bits)[np.argsort(-np.abs(score), kind="stable")]
    return [[k, int(right[:k].sum())] for k in kept(m)]


def test_on_simulated_exact_gaussian_mechanisms_it_rejects_a_true_claim_at_most_five_percent_of_runs():
    """400 runs of an exact mu-GDP mechanism (mu 2, 300 canaries): the bound on mu exceeds the true mu, and the
    epsilon bound the mechanism's true epsilon at delta 1e-5, in at most 5% of runs (at 95%: <= 29 of 400, the
    binomial's 99.9% quantile at rate 5%)."""
    rng, mu, delta = np.random.default_rng(7), 2.0, 1e-5
    true_epsilon = fdp_one_run.gdp_epsilon(mu, delta)
    over_mu = over_eps = 0
    for _ in range(400):
        counts = _simulated(mu, 300, rng)
        eps, mu_hat, _ = fdp_one_run.menu_lower(counts, canaries=300, delta=delta)
        over_mu, over_eps = over_mu + (mu_hat > mu), over_eps + (eps > true_epsilon)
    assert over_mu <= 29 and over_eps <= 29


def test_it_certifies_about_nothing_at_huge_noise():
    """sigma 1e4 (mu 2e-4): over 50 runs of 990 canaries both bounds stay near 0."""
    rng = np.random.default_rng(3)
    bounds = [fdp_one_run.menu_lower(_simulated(2e-4, 990, rng), canaries=990, delta=1e-5) for _ in range(50)]
    assert max(b[0] for b in bounds) < 0.3 and max(b[1] for b in bounds) < 0.15
    assert np.mean([b[0] for b in bounds]) < 0.05


@pytest.mark.parametrize("m", [50, 100, 1000])
def test_every_guess_right_and_pure_it_is_steinke_s_bound(m):
    """m binary canaries, all guessed right, delta 0: both bounds are the largest eps with q^m < alpha (the cap), and
    at delta 1e-5 the f-DP bound, which charges no delta * m term, is not below Steinke et al.'s."""
    ours = fdp_one_run.epsilon_lower(guesses=m, right=m, canaries=m, delta=0.0)
    theirs = empirical_epsilon.epsilon_lower(guesses=m, right=m, canaries=m, classes=2)
    exact = math.log(1 / (0.05 ** (-1 / m) - 1))  # (1 + e^-eps)^-m = alpha
    assert ours == pytest.approx(theirs, abs=1e-6) and ours == pytest.approx(exact, abs=1e-6)
    approximate = fdp_one_run.epsilon_lower(guesses=m, right=m, canaries=m, delta=1e-5)
    assert approximate >= empirical_epsilon.epsilon_lower(guesses=m, right=m, canaries=m, classes=2, delta=1e-5)


@pytest.mark.parametrize("mu", [0.3, 1.0, 3.0])
def test_the_gdp_epsilon_is_the_curve_s_own(mu):
    """delta(eps) of mu-GDP at the returned eps is the asked delta, and it matches the Gaussian mechanism's exact
    (eps, delta) (sensitivity 1, sigma 1/mu: Balle & Wang's formula, written with scipy's norm)."""
    eps = fdp_one_run.gdp_epsilon(mu, 1e-5)
    sigma = 1 / mu
    exact = stats.norm.cdf(1 / (2 * sigma) - eps * sigma) - math.exp(eps) * stats.norm.cdf(-1 / (2 * sigma) - eps * sigma)
    assert exact == pytest.approx(1e-5, rel=1e-6)


def _largest_tail(fbar, *, canaries: int, guesses: int, right: int) -> float:
    """max P[T >= right] over distributions p of T on 0..guesses meeting the per-level f-DP constraints the module's
    argument derives (r_i <= fbar(h_{i-1}) for i >= 1), by SLSQP from 12 random starts."""
    from scipy.optimize import minimize

    rng, j = np.random.default_rng(0), np.arange(guesses + 1)

    def slack(p, i):
        return fbar(((guesses - j[i - 1:]) * p[i - 1:]).sum() / canaries) - (j[i:] * p[i:]).sum() / canaries

    constraints = [{"type": "eq", "fun": lambda p: p.sum() - 1}] + [
        {"type": "ineq", "fun": lambda p, i=i: slack(p, i)} for i in range(1, guesses + 1)]
    best = 0.0
    for _ in range(12):
        found = minimize(lambda p: -p[right:].sum(), rng.dirichlet(np.ones(guesses + 1)), method="SLSQP",
                         bounds=[(0, 1)] * (guesses + 1), constraints=constraints, options={"ftol": 1e-12})
        if found.success and min(slack(found.x, i) for i in range(1, guesses + 1)) > -1e-7:
            best = max(best, float(found.x[right:].sum()))
    return best


@pytest.mark.parametrize(("canaries", "guesses", "right", "epsilon"), [(8, 8, 8, 1.0), (10, 6, 6, 1.0),
                                                                       (12, 8, 7, 1.5)])
def test_the_recursion_s_level_is_the_largest_tail_the_f_dp_constraints_allow(canaries, guesses, right, epsilon):
    """The step the module takes from the paper (the least mass sits at T = v, each level's deficit at that level):
    the smallest alpha at which the recursion rejects v right of k is the largest P[T >= v] of any distribution of T
    that meets the per-level constraints, found by numerical optimisation on small games (sound: never below it;
    exact: equal to it)."""
    inverse = fdp_one_run.inverse_eps_delta(epsilon, 0.0)
    low, high = 0.0, 1.0
    for _ in range(40):
        mid = (low + high) / 2
        low, high = (low, mid) if fdp_one_run.rejects(inverse, guesses=guesses, right=right, canaries=canaries,
                                                      alpha=mid) else (mid, high)
    tail = _largest_tail(lambda x: min(1.0, math.exp(epsilon) * x, 1 - math.exp(-epsilon) * (1 - x)),
                         canaries=canaries, guesses=guesses, right=right)
    assert tail == pytest.approx(high, abs=1e-3)


@pytest.mark.parametrize("epsilon", [0.0, 1.0, 5.0])
def test_a_claim_at_delta_1_holds_for_every_mechanism_so_no_counts_reject_it_even_at_level_1(epsilon):
    """(eps, 1)-DP constrains nothing (its trade-off curve is 0): every guess right is still no evidence against it,
    so its p-value is 1 and its bound 0, at every level up to 1 (the p-value's search starts at level 1)."""
    for m in (5, 50):
        assert fdp_one_run.p_value(guesses=m, right=m, canaries=m, classes=10, epsilon=epsilon, delta=1.0) == 1.0
        assert not fdp_one_run.rejects(lambda r: 0.0, guesses=m, right=m, canaries=m, alpha=1.0)
        assert fdp_one_run.epsilon_lower(guesses=m, right=m, canaries=m, delta=1.0, classes=10) == 0.0


@pytest.mark.parametrize("mu", [0.5, 2.0])
def test_the_gdp_epsilon_at_delta_0_s_own_value_is_exactly_0(mu):
    """At delta = delta(0) of mu-GDP, epsilon 0 already meets it: 0 exactly, not a bisection's last midpoint; just
    below it a positive epsilon."""
    at_zero = fdp_one_run.gdp_delta(mu, 0.0)
    assert at_zero == pytest.approx(2 * stats.norm.cdf(mu / 2) - 1, rel=1e-12)
    assert fdp_one_run.gdp_epsilon(mu, at_zero) == 0.0
    assert fdp_one_run.gdp_epsilon(mu, at_zero * 0.999) > 0.0


def test_gdp_delta_names_a_bad_mu():
    with pytest.raises(ValueError, match=r"\bmu\b"):
        fdp_one_run.gdp_delta(math.nan, 1.0)
    with pytest.raises(ValueError, match=r"\bmu\b"):
        fdp_one_run.gdp_delta(-1.0, 1.0)


@pytest.mark.parametrize(("epsilon", "delta"), [(1.0, 0.5), (0.5, 0.1), (3.0, 1e-5)])
def test_the_eps_delta_inverse_is_a_rate_and_0_up_to_delta(epsilon, delta):
    """fbar^-1 of (eps, delta)-DP is a rate in [0, 1]; a rate of right guesses up to delta needs no wrong ones (the
    delta slack alone allows it), so there it is 0, never below."""
    inverse = fdp_one_run.inverse_eps_delta(epsilon, delta)
    rates = np.linspace(0.0, 1.0, 201)
    values = np.array([inverse(r) for r in rates])
    assert ((values >= 0) & (values <= 1)).all()
    assert (values[rates <= delta] == 0.0).all()


@pytest.mark.parametrize(("mu", "epsilon"), [(0.1, 3.8), (0.3, 11.4), (1.0, 38.2), (1.0, 38.5)])
def test_gdp_delta_is_never_negative_where_its_two_terms_round_past_each_other(mu, epsilon):
    """Far in the tail both terms of delta(eps) are subnormal and their difference rounds below 0 (-2.4e-311 at mu 1,
    eps 38.2): the delta returned is a probability, 0 there."""
    assert fdp_one_run.gdp_delta(mu, epsilon) == 0.0
