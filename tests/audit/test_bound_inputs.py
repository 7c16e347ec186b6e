"""The canary bounds' API as a plugin calls it: numbers no audit can produce (counts out of order, negative or
fractional, one class, delta outside [0, 1], a NaN, infinite or negative claim, a level outside (0, 1), a
menu or an attack count below 1; delta 1 holds for every mechanism, so a bound at it is 0, but no count of
canaries can test a claim at it) raise a ValueError naming the argument at once, never a bound computed from them."""

from __future__ import annotations

import math

import pytest

from vflpriv.common import canary_bound, empirical_epsilon, fdp_one_run
from vflpriv.tradeoff import epsilon as claims

NAN, INF = math.nan, math.inf
COUNTS = dict(guesses=5, right=5, canaries=5)


def _calls():
    """(call, the argument its ValueError must name): one bad argument each, the others valid."""
    ee, fd, cb = empirical_epsilon, fdp_one_run, canary_bound
    yield lambda: ee.epsilon_lower(guesses=5, right=5, canaries=5, classes=1), "classes"
    yield lambda: ee.epsilon_lower(guesses=5, right=5, canaries=5, classes=0), "classes"
    yield lambda: ee.epsilon_lower(guesses=5.5, right=5, canaries=6, classes=10), "guesses"
    yield lambda: ee.epsilon_lower(**COUNTS, classes=10, delta=-1e-3), "delta"
    yield lambda: ee.epsilon_lower(**COUNTS, classes=10, delta=1.5), "delta"
    yield lambda: ee.epsilon_lower(**COUNTS, classes=10, delta=NAN), "delta"
    yield lambda: ee.epsilon_lower(**COUNTS, classes=10, alpha=0.0), "alpha"
    yield lambda: ee.epsilon_lower(**COUNTS, classes=10, alpha=2.0), "alpha"
    yield lambda: ee.p_value(**COUNTS, classes=10, epsilon=NAN), "epsilon"
    yield lambda: ee.p_value(**COUNTS, classes=10, epsilon=-1.0), "epsilon"
    yield lambda: ee.cap(canaries=-5, classes=10), "canaries"
    yield lambda: ee.cap(canaries=5, classes=1), "classes"
    yield lambda: ee.cap(canaries=5, classes=10, menu=0), "menu"
    yield lambda: ee.cap(canaries=5, classes=10, attacks=-1), "attacks"
    yield lambda: ee.kept(-3), "guessed"
    yield lambda: fd.epsilon_lower(**COUNTS, delta=-1.0, classes=10), "delta"
    yield lambda: fd.epsilon_lower(**COUNTS, delta=NAN, classes=10), "delta"
    yield lambda: fd.epsilon_lower(**COUNTS, delta=1.5, classes=10), "delta"
    yield lambda: fd.epsilon_lower(**COUNTS, delta=1e-5, classes=10, alpha=-0.1), "alpha"
    yield lambda: fd.p_value(**COUNTS, classes=10, epsilon=NAN, delta=1e-5), "epsilon"
    yield lambda: fd.p_value(**COUNTS, classes=10, epsilon=INF, delta=1e-5), "epsilon"
    yield lambda: fd.gdp_epsilon(NAN, 1e-5), "mu"
    yield lambda: fd.gdp_epsilon(1.0, NAN), "delta"
    yield lambda: fd.mu_lower(guesses=5.0, right=5, canaries=5), "guesses"
    yield lambda: cb.cap(canaries=5, classes=10, delta=-1.0), "delta"
    yield lambda: cb.cap(canaries=5, classes=10, delta=NAN), "delta"
    yield lambda: cb.cap(canaries=5, classes=10, delta=1e-5, menu=0), "menu"
    yield lambda: cb.pure_cap(canaries=-1, classes=10), "canaries"
    yield lambda: cb.pure_cap(canaries=5, classes=1), "classes"
    yield lambda: cb.canaries_needed(NAN, classes=10), "claim"
    yield lambda: cb.canaries_needed(INF, classes=10, delta=1e-5), "claim"
    yield lambda: cb.canaries_needed(-1.0, classes=10), "claim"
    yield lambda: cb.canaries_needed(1.0, classes=1), "classes"
    yield lambda: cb.canaries_needed(1.0, classes=10, delta=NAN), "delta"
    yield lambda: cb.canaries_needed(1.0, classes=10, delta=1.0), "delta"
    yield lambda: cb.canaries_needed(1.0, classes=10, attacks=0), "attacks"
    yield lambda: cb.menu_p_value([[5, 5]], canaries=5, classes=10, epsilon=NAN, delta=1e-5), "epsilon"
    yield lambda: cb.menu_p_value([[5, 5]], canaries=5, classes=10, epsilon=NAN, delta=0.0), "epsilon"
    yield lambda: cb.menu_p_value([[5, 5]], canaries=5, classes=10, epsilon=INF, delta=1e-5), "epsilon"
    yield lambda: cb.menu_p_value([[5, 5]], canaries=5, classes=10, epsilon=-1.0, delta=1e-5), "epsilon"
    yield lambda: cb.menu_lower([[9, 9]], canaries=5, classes=10, delta=1e-5), "canaries"
    yield lambda: cb.menu_lower([[5, 6]], canaries=9, classes=10, delta=0.0), "right"
    yield lambda: claims.claim_test({"gc": ([[5, 5]], 5)}, planned=1, classes=10, claim=NAN, delta=1e-5), "claim"
    yield lambda: claims.claim_test({"gc": ([[5, 5]], 5)}, planned=1, classes=10, claim=INF, delta=1e-5), "claim"
    yield lambda: claims.claim_test({"gc": ([[5, 5]], 5)}, planned=0, classes=10, claim=1.0, delta=1e-5), "planned"
    yield lambda: claims.claim_test({"gc": ([[5, 5]], 5), "mc": ([[5, 5]], 5)}, planned=1, classes=10, claim=1.0,
                                    delta=1e-5), "planned"
    yield lambda: claims.holm([NAN, 0.01]), "p_values"
    yield lambda: claims.holm([1.5, 0.01]), "p_values"


@pytest.mark.parametrize("call, argument", list(_calls()))
def test_a_bound_refuses_numbers_no_audit_produces_naming_the_argument(call, argument):
    with pytest.raises(ValueError, match=rf"\b{argument}\b"):
        call()


@pytest.mark.parametrize("claim, delta", [(1e300, 1e-5), (NAN, 0.0), (14.5, 0.0), (40.0, 0.3)])
def test_an_absurd_claim_or_delta_returns_at_once(claim, delta, monkeypatch):
    """No search where no count up to MAX_CANARIES can test the claim (or the claim is no number): the caps the
    search tries are never computed."""
    def searched(**_):
        raise AssertionError("canaries_needed searched the counts")
    monkeypatch.setattr(canary_bound, "cap", searched)
    with pytest.raises(ValueError):
        canary_bound.canaries_needed(claim, classes=10, attacks=3, delta=delta)


def test_a_valid_bound_is_unchanged_by_the_checks():
    """The checks only refuse: valid numbers give the bounds they gave (values as computed before the checks)."""
    assert empirical_epsilon.epsilon_lower(guesses=25, right=25, canaries=25, classes=10) == pytest.approx(
        math.log(9 * (0.05 ** (1 / 25)) / (1 - 0.05 ** (1 / 25))), abs=1e-9)
    for claim, delta in ((0.0, 0.0), (1.0, 0.0), (2.0, 1e-5)):  # the fewest: one canary fewer cannot test it
        needed = canary_bound.canaries_needed(claim, classes=10, delta=delta)
        caps = [canary_bound.cap(canaries=n, classes=10, menu=len(empirical_epsilon.kept(n)), delta=delta)
                for n in (needed - 1, needed)]
        assert not canary_bound.testable(claim, caps[0]) and canary_bound.testable(claim, caps[1])
    assert canary_bound.cap(canaries=0, classes=10, delta=1e-5) == canary_bound.pure_cap(canaries=0, classes=10) == 0.0
    assert claims.holm([0.01, 0.2]) == [True, False]


@pytest.mark.parametrize("claim", [709.0, 710.0, 1e4, 1e300])
@pytest.mark.parametrize("delta", [0.0, 1e-5])
def test_a_huge_finite_claim_is_untestable_at_once_at_every_delta(claim, delta, monkeypatch):
    """dp-gaussian at a tiny sigma claims thousands: its check says untestable (p 1) at once: at most one bisection of
    each menu entry's f-DP p-value (2 + 29 recursions, to 1e-6 on log10 of the level over [-300, 0]), no search over
    counts or epsilons; at delta > 0 the f-DP curve overflowed math.exp above 709.78 and failed the table."""
    attacks = {"gc": ([[300, 300], [150, 150], [75, 75], [30, 30]], 300)}
    claims.cap_of(attacks, planned=3, classes=10, delta=delta)  # the cap's own search (cached) is not the claim's
    fdp_one_run.p_value.cache_clear()
    calls = []
    recursion = fdp_one_run.rejects
    monkeypatch.setattr(fdp_one_run, "rejects", lambda *a, **k: calls.append(1) or recursion(*a, **k))
    test = claims.claim_test(attacks, planned=3, classes=10, claim=claim, delta=delta)
    assert test.p_value == 1.0 and not test.testable
    assert len(calls) <= 4 * (2 + math.ceil(math.log2(300 / 1e-6)))


@pytest.mark.parametrize("mu", [1.0, 40.0])
def test_gdp_delta_is_finite_and_falls_with_epsilon_past_the_exp_overflow(mu):
    """delta(eps) of mu-GDP at a claim of hundreds or thousands: a number in [0, 1], falling with eps (e^eps overflowed
    above 709.78); unchanged where e^eps was finite (mu 1, eps 1: Phi(-0.5) - e Phi(-1.5))."""
    deltas = [fdp_one_run.gdp_delta(mu, eps) for eps in (1.0, 700.0, 709.5, 710.0, 800.0, 1e4, 1e300)]
    assert all(0.0 <= d <= 1.0 for d in deltas) and deltas == sorted(deltas, reverse=True)
    assert fdp_one_run.gdp_delta(40.0, 710.0) > 0.9  # mu 40 still leaks almost surely at eps 710
    assert fdp_one_run.gdp_delta(1.0, 1.0) == pytest.approx(0.3085375387 - math.e * 0.0668072013, abs=1e-9)


@pytest.mark.parametrize("argument", ["guesses", "right", "canaries", "classes", "delta", "alpha", "epsilon"])
def test_a_boolean_is_no_number_for_any_argument(argument):
    """True is an int and a Real to Python, and 1 would be a valid count, class, delta, level or claim: a bound
    refuses it all the same, naming the argument (a flag passed in the wrong place, not a number an audit wrote)."""
    values = dict(guesses=5, right=5, canaries=5, classes=10, delta=0.0, alpha=0.05, epsilon=1.0) | {argument: True}
    with pytest.raises(ValueError, match=rf"\b{argument}\b"):
        if argument == "alpha":
            empirical_epsilon.epsilon_lower(guesses=5, right=5, canaries=5, classes=10, alpha=True)
        else:
            empirical_epsilon.p_value(**{k: v for k, v in values.items() if k != "alpha"})


def test_delta_1_is_a_valid_bound_s_delta_and_certifies_nothing():
    """(eps, 1)-DP holds for every mechanism: a bound at delta 1 is 0 (not a refusal), while a claim must be testable,
    so canaries_needed refuses delta 1 (its ``below_one``)."""
    assert empirical_epsilon.epsilon_lower(**COUNTS, classes=10, delta=1.0) == 0.0
    assert fdp_one_run.epsilon_lower(**COUNTS, classes=10, delta=1.0) == 0.0
    assert canary_bound.cap(canaries=5, classes=10, delta=1.0) == 0.0
    with pytest.raises(ValueError, match=r"\bdelta\b"):
        canary_bound.canaries_needed(1.0, classes=10, delta=1.0)


@pytest.mark.parametrize("right", [-1, 6])
def test_a_count_of_right_guesses_outside_0_to_guesses_is_refused(right):
    with pytest.raises(ValueError, match=rf"right={right}\b"):
        empirical_epsilon.p_value(guesses=5, right=right, canaries=5, classes=10, epsilon=1.0)


@pytest.mark.parametrize("value", [True, 2.0, 2.5])
def test_a_count_given_as_a_float_or_a_boolean_is_refused(value):
    """The canaries, menu entries and attacks a cap is computed for, and the guesses a menu keeps, are integers: 2.0
    and True name a count no audit writes as one."""
    for call, argument in ((lambda: empirical_epsilon.cap(canaries=value, classes=10), "canaries"),
                           (lambda: canary_bound.cap(canaries=5, classes=10, menu=value), "menu"),
                           (lambda: empirical_epsilon.kept(value), "guessed")):
        with pytest.raises(ValueError, match=rf"\b{argument}\b"):
            call()


@pytest.mark.parametrize("value", [10.0, 2.5])
def test_classes_given_as_a_float_are_refused(value):
    with pytest.raises(ValueError, match=r"\bclasses\b"):
        empirical_epsilon.cap(canaries=5, classes=value)


@pytest.mark.parametrize("argument", ["right", "canaries"])
def test_a_fractional_count_is_refused_naming_it(argument):
    values = dict(guesses=5, right=5, canaries=5) | {argument: 5.5}
    with pytest.raises(ValueError, match=rf"^{argument} must be an integer"):
        empirical_epsilon.p_value(**values, classes=10, epsilon=1.0)
