"""The canary bounds' edges (``vflpriv.common``: ``empirical_epsilon``, ``fdp_one_run``, ``canary_bound``), each
written for a mutant the mutation scheme left alive: the binary default, no counts and no canaries certify nothing."""

from __future__ import annotations

import pytest

from vflpriv.common import canary_bound, empirical_epsilon, fdp_one_run

COUNTS = [[100, 90], [50, 50], [25, 25], [10, 10]]


def test_the_f_dp_bounds_default_to_binary_canaries():
    """Without ``classes`` every f-DP bound is the binary game's, and ten classes certify more from the same counts
    (so the default is seen)."""
    mu2 = fdp_one_run.mu_lower(guesses=100, right=90, canaries=100, classes=2)
    assert fdp_one_run.mu_lower(guesses=100, right=90, canaries=100) == mu2
    assert fdp_one_run.mu_lower(guesses=100, right=90, canaries=100, classes=10) > mu2 > 0
    binary = fdp_one_run.menu_epsilon(COUNTS, canaries=100, delta=1e-5, classes=2)
    assert fdp_one_run.menu_epsilon(COUNTS, canaries=100, delta=1e-5) == binary
    assert fdp_one_run.menu_epsilon(COUNTS, canaries=100, delta=1e-5, classes=10)[0] > binary[0] > 0
    assert fdp_one_run.menu_lower(COUNTS, canaries=100, delta=1e-5) == fdp_one_run.menu_lower(
        COUNTS, canaries=100, delta=1e-5, classes=2)


def test_no_counts_certify_nothing_and_reject_nothing():
    """A menu without entries (no canary guessed): bounds 0 and p-value 1 with the (0, 0) entry, in both tests."""
    assert fdp_one_run.menu_lower([], canaries=100, delta=1e-5) == (0.0, 0.0, 0)
    assert fdp_one_run.fdp_bounds([], canaries=100, classes=10, delta=1e-5) == (0.0, 0.0, 0.0)
    assert fdp_one_run.menu_p_value([], canaries=100, classes=10, epsilon=1.0, delta=1e-5) == (1.0, (0, 0))
    assert empirical_epsilon.menu_p_value([], canaries=100, classes=10, epsilon=1.0) == (1.0, (0, 0))


@pytest.mark.parametrize("delta", [0.0, 1e-5])
def test_no_canaries_cap_nothing(delta):
    """Zero canaries: every cap is 0 (nothing is testable), while one canary of a coin-flip level is not."""
    for cap in (empirical_epsilon.cap, canary_bound.cap):
        assert cap(canaries=0, classes=10, delta=delta) == 0.0
    assert canary_bound.pure_cap(canaries=0, classes=10) == 0.0
    assert canary_bound.cap(canaries=1, classes=10, menu=1, alpha=0.5, delta=delta) > 2.0


@pytest.mark.parametrize(("m", "epsilon", "classes"), [(2, 1.0, 2), (3, 0.5, 2), (2, 1.0, 10), (20, 2.0, 10)])
def test_the_f_dp_p_value_of_every_guess_right_at_delta_0_is_the_exact_tail(m, epsilon, classes):
    """m guesses all right, delta 0: the f-DP test is the exact one (its p-value q^m, q = e^eps / (e^eps + C - 1)),
    rounded up by at most its 1 + 3e-6 factor, at large p-values (0.53) as at small ones (1.2e-7)."""
    exact = empirical_epsilon.right_guess_bound(epsilon, classes) ** m
    p = fdp_one_run.p_value(guesses=m, right=m, canaries=m, classes=classes, epsilon=epsilon, delta=0.0)
    assert exact <= p <= exact * (1 + 1e-5)


def test_a_claim_is_printed_with_two_decimals_below_ten_thousand_and_three_digits_from_it():
    assert empirical_epsilon.claim_text(9999.5, 1e-5) == "epsilon 9999.50 at delta 1e-05"
    assert empirical_epsilon.claim_text(1e4, 0.0) == "epsilon 1e+04 (pure)"


@pytest.mark.parametrize("mu", [0.5, 2.0])
def test_the_gdp_inverse_undoes_the_gaussian_curve_and_holds_its_ends(mu):
    """fbar^-1 of G_mu: fbar(x) = 1 - G_mu(x) = Phi(Phi^-1(x) + mu) (scipy's normal), so fbar(fbar^-1(r)) = r; no
    right guess needs no wrong one, and every guess right needs every wrong one."""
    from scipy.stats import norm

    inverse = fdp_one_run.inverse_gdp(mu)
    assert inverse(0.0) == 0.0 and inverse(1.0) == 1.0
    for r in (0.05, 0.3, 0.7, 0.95):
        assert norm.cdf(norm.ppf(inverse(r)) + mu) == pytest.approx(r, rel=1e-9)


def test_zero_gdp_is_perfect_privacy():
    """0-GDP: delta(eps) = 0 at every eps (the formula divides by mu, so mu 0 is its own case), while 1-GDP at eps 0
    has delta 2 Phi(1/2) - 1 (scipy's normal)."""
    from scipy.stats import norm

    assert fdp_one_run.gdp_delta(0.0, 0.0) == 0.0 and fdp_one_run.gdp_delta(0.0, 2.0) == 0.0
    assert fdp_one_run.gdp_delta(1.0, 0.0) == pytest.approx(2 * norm.cdf(0.5) - 1, rel=1e-9)


def test_a_menu_of_one_entry_is_tested_at_the_full_level():
    """One entry, no Bonferroni share: the f-DP menu's bounds are that entry's at alpha itself."""
    epsilon = fdp_one_run.epsilon_lower(guesses=100, right=90, canaries=100, delta=1e-5)
    mu = fdp_one_run.mu_lower(guesses=100, right=90, canaries=100)
    assert fdp_one_run.menu_epsilon([[100, 90]], canaries=100, delta=1e-5) == (epsilon, 100)
    assert fdp_one_run.menu_lower([[100, 90]], canaries=100, delta=1e-5) == (epsilon, mu, 100)
    assert epsilon > fdp_one_run.epsilon_lower(guesses=100, right=90, canaries=100, delta=1e-5, alpha=0.025)


def test_steinke_s_menu_p_value_defaults_to_a_pure_claim():
    pure = empirical_epsilon.menu_p_value(COUNTS, canaries=100, classes=2, epsilon=1.0, delta=0.0)
    assert empirical_epsilon.menu_p_value(COUNTS, canaries=100, classes=2, epsilon=1.0) == pure
    assert empirical_epsilon.menu_p_value(COUNTS, canaries=100, classes=2, epsilon=1.0, delta=1e-2)[0] > pure[0]


def test_the_canaries_a_claim_needs_may_reach_max_canaries_exactly_and_no_further():
    """250000 seeds of 3 binary canaries cap below a claim that 4 a run (1e6 pooled, MAX_CANARIES itself) cap above:
    the search returns MAX_CANARIES; a claim above the cap there is untestable."""
    seeds, limit = 250_000, canary_bound.MAX_CANARIES
    three, four = (canary_bound.cap(canaries=n * seeds, classes=2, menu=len(empirical_epsilon.kept(n)))
                   for n in (3, 4))
    assert 4 * seeds == limit and three + 0.01 < four
    assert canary_bound.canaries_needed((three + four) / 2, classes=2, seeds=seeds) == limit
    with pytest.raises(canary_bound.Untestable):
        canary_bound.canaries_needed(four + 0.01, classes=2, seeds=seeds)


def test_the_doubling_search_may_end_at_max_canaries_exactly():
    """100000 seeds: a claim between the caps of 9 and 10 canaries a run (9e5 and 1e6 pooled) is found by doubling and
    bisection at MAX_CANARIES itself, not refused."""
    nine, ten = (canary_bound.cap(canaries=n * 100_000, classes=2) for n in (9, 10))
    assert canary_bound.canaries_needed((nine + ten) / 2, classes=2, seeds=100_000) == canary_bound.MAX_CANARIES


@pytest.mark.parametrize(("epsilon", "delta"), [(1.0, 0.0), (1.0, 1e-5), (3.0, 1e-3)])
def test_the_eps_delta_inverse_undoes_its_trade_off_curve_near_every_guess_right(epsilon, delta):
    """fbar^-1 of f_{eps, delta} (Dong, Roth & Su's curve max(0, 1 - delta - e^eps x, e^-eps (1 - delta - x))): with
    fbar = 1 - f written out, fbar(fbar^-1(r)) = r wherever r > delta, up to r near 1, where the curve's third piece
    binds."""
    import math

    inverse = fdp_one_run.inverse_eps_delta(epsilon, delta)

    def fbar(x: float) -> float:
        return 1 - max(0.0, 1 - delta - math.exp(epsilon) * x, math.exp(-epsilon) * (1 - delta - x))

    for r in (0.05, 0.3, 0.7, 0.95, 0.99, 0.999):
        assert fbar(inverse(r)) == pytest.approx(r, abs=1e-12)


@pytest.mark.parametrize("mu", [0.0, 1e-6, 1e-4, 0.01])
def test_the_gdp_epsilon_of_a_tiny_mu_is_tiny_and_never_negative(mu):
    """Below delta(0) <= delta (mu 0, 1e-6) the epsilon at delta is 0; just above it, a small positive epsilon whose
    delta is the asked one (9e-5 at mu 1e-4: the bisection must not leave [0, EPS_MAX])."""
    epsilon = fdp_one_run.gdp_epsilon(mu, 1e-5)
    if fdp_one_run.gdp_delta(mu, 0.0) <= 1e-5:
        assert epsilon == 0.0
    else:
        assert 0 < epsilon < 0.05 and fdp_one_run.gdp_delta(mu, epsilon) == pytest.approx(1e-5, rel=1e-6)


@pytest.mark.parametrize("module", [empirical_epsilon, fdp_one_run])
def test_a_menu_s_p_value_is_its_smallest_entry_s_times_the_menu_s_size(module):
    """Bonferroni by hand: two entries, the smaller of their p-values doubled, and the entry it comes from."""
    menu = [[100, 90], [50, 50]]
    alone = [module.p_value(guesses=g, right=r, canaries=100, classes=2, epsilon=1.0, delta=1e-5) for g, r in menu]
    assert module.menu_p_value(menu, canaries=100, classes=2, epsilon=1.0, delta=1e-5) == (2 * min(alone), (50, 50))


def test_the_menu_names_a_bad_count_of_guesses():
    with pytest.raises(ValueError, match=r"^guessed must be an integer >= 0, got -1$"):
        empirical_epsilon.kept(-1)


def test_a_claim_exactly_the_margin_below_its_cap_is_not_testable():
    cap = 3.0
    assert not canary_bound.testable(cap - canary_bound.CAP_MARGIN, cap)
    assert canary_bound.testable(cap - 2 * canary_bound.CAP_MARGIN, cap)


def test_a_count_past_max_canaries_is_never_returned_even_where_its_cap_would_do():
    """300000 seeds: 4 canaries a run (1.2e6 pooled) would test a claim that 3 (9e5) cannot, but 4 is past
    MAX_CANARIES: the claim is untestable within it."""
    seeds = 300_000
    three, four = (canary_bound.cap(canaries=n * seeds, classes=2, menu=3) for n in (3, 4))
    with pytest.raises(canary_bound.Untestable):
        canary_bound.canaries_needed.__wrapped__((three + four) / 2, classes=2, seeds=seeds)


def test_the_search_stops_at_max_canaries_when_the_cap_there_is_below_the_claim(monkeypatch):
    """At delta 1e-5 the f-DP cap of 1e6 binary canaries (12.33782) is just below the closed-form ceiling (12.33800):
    a claim between them passes the ceiling, the doubling reaches 5 canaries x 200000 seeds = MAX_CANARIES exactly
    and is refused there, never evaluating a cap past it."""
    seen = []
    cap = canary_bound.cap
    monkeypatch.setattr(canary_bound, "cap", lambda **kw: seen.append(kw["canaries"]) or cap(**kw))
    at_max = cap(canaries=canary_bound.MAX_CANARIES, classes=2, delta=1e-5)
    claim = at_max + 4e-5
    assert canary_bound.testable(claim, canary_bound.pure_cap(canaries=canary_bound.MAX_CANARIES, classes=2))
    with pytest.raises(canary_bound.Untestable):
        canary_bound.canaries_needed.__wrapped__(claim, classes=2, delta=1e-5, seeds=200_000)
    assert max(seen) == canary_bound.MAX_CANARIES


def test_the_chosen_test_s_name_is_the_one_records_print():
    assert canary_bound.chosen_test(0.0) == "Steinke" and canary_bound.chosen_test(1e-5) == "f-DP"


def test_the_closed_form_cap_defaults_to_one_attack():
    """attacks=1 by default: log((C - 1) / (level^(-1/m) - 1)) at level alpha / 4 (the menu's four entries)."""
    import math

    level = empirical_epsilon.ALPHA / 4
    expected = math.log(9 / (level ** (-1 / 300) - 1))
    assert canary_bound.pure_cap(canaries=300, classes=10) == pytest.approx(expected, rel=1e-12)


def test_canaries_needed_names_a_bad_claim_and_refuses_delta_1():
    with pytest.raises(ValueError, match=r"^claim must be a finite number >= 0, got nan$"):
        canary_bound.canaries_needed(float("nan"), classes=2)
    with pytest.raises(ValueError, match=r"^delta must be a number in \[0, 1\), got 1.0$"):
        canary_bound.canaries_needed(1.0, classes=2, delta=1.0)


def test_a_p_value_below_every_level_searched_is_still_a_tiny_probability():
    """1000 ten-class canaries all right at epsilon 0: the exact tail is 1e-1000; the f-DP p-value stays in (0, 1e-250],
    far below any level a report uses, never negative."""
    p = fdp_one_run.p_value(guesses=1000, right=1000, canaries=1000, classes=10, epsilon=0.0, delta=0.0)
    assert 0 < p <= 1e-250


def test_more_runs_than_the_most_canaries_is_untestable_not_an_argument_error():
    """More seeds than MAX_CANARIES: even one canary a run is past the most, so no count can test the claim (the
    message once asked for the cap at 0 canaries a run and raised the menu's argument error instead)."""
    with pytest.raises(canary_bound.Untestable, match="at one a run"):
        canary_bound.canaries_needed(1.0, classes=2, seeds=canary_bound.MAX_CANARIES + 1)


def test_no_right_guess_certifies_nothing_even_at_level_1():
    """Steinke et al.'s p-value of 0 right guesses is 1 whatever the claim, so no epsilon is rejected at any level up
    to 1 (a p-value of 1 is not below the level 1): the bound is 0, not the search's ceiling."""
    assert empirical_epsilon.p_value(guesses=10, right=0, canaries=10, classes=10, epsilon=0.0) == 1.0
    for alpha in (0.05, 1.0):
        assert empirical_epsilon.epsilon_lower(guesses=10, right=0, canaries=10, classes=10, alpha=alpha) == 0.0


def test_a_p_value_at_the_search_s_floor_is_a_level_the_recursion_rejects_at():
    """305 ten-class canaries all right at epsilon 0: the exact tail is 1e-305, below the floor 1e-300 the search
    starts from, so the p-value is the floor, a level at which the counts reject (sound), and not one below the tail."""
    p = fdp_one_run.p_value(guesses=305, right=305, canaries=305, classes=10, epsilon=0.0, delta=0.0)
    assert p == pytest.approx(1e-300, rel=1e-9)
    assert fdp_one_run.rejects(fdp_one_run.inverse_eps_delta(0.0, 0.0), guesses=305, right=305, canaries=305,
                               classes=10, alpha=p)
