"""The empirical epsilon over seeds (tradeoff/epsilon.py) by hand: menu counts summed entry by entry over the
trainings of a setting, the bound of the pooled counts, the worst case over the planned attacks at the Bonferroni
level naming its attack, the weakest claimed epsilon of the setting, and a claim rejected only from the worst case."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from vflpriv.common.empirical_epsilon import ALPHA, menu_lower
from vflpriv.common.fdp_one_run import menu_epsilon
from vflpriv.tradeoff.epsilon import epsilon_table, pooled_counts, pooled_lower


def _row(attack: str, seed: int, counts, *, canaries: int = 50, strength: float = 1.0, epsilon: float = 2.0,
         status: str = "ok", delta: float = float("nan"), classes: int = 2) -> dict:
    return dict(method="m", dataset="d", defense="label-dp", phase="finetune", strength=strength, attack=attack,
                seed=seed, status=status, canaries=canaries, canary_counts=json.dumps(counts) if counts else "",
                num_classes=classes, epsilon=epsilon, epsilon_lower_delta=delta, strength_axis="epsilon",
                strength_stronger="lower")


def test_counts_are_summed_entry_by_entry_over_the_runs_that_guessed():
    rows = pd.DataFrame([_row("gc", 0, [[50, 40], [25, 24], [13, 13]]), _row("gc", 1, [[50, 30], [25, 20]]),
                         _row("gc", 2, None, canaries=50)])  # a run without guesses adds no canary either
    counts, canaries = pooled_counts(rows)
    assert counts == [[100, 70], [50, 44], [13, 13]] and canaries == 100


def test_the_pooled_bound_is_the_menu_bound_of_the_summed_counts_with_its_own_guesses():
    rows = pd.DataFrame([_row("gc", 0, [[50, 40], [25, 24]]), _row("gc", 1, [[50, 41], [25, 25]])])
    bound, guesses = menu_lower([[100, 81], [50, 49]], canaries=100, classes=2)
    fdp = menu_epsilon([[100, 81], [50, 49]], canaries=100, classes=2, delta=0.0)[0]
    assert pooled_lower(rows) == (bound, guesses, {100: 81 / 100, 50: 49 / 50}[guesses], fdp)
    assert bound > 0 and guesses == 50  # the confident half certifies more than every guess
    tighter = pooled_lower(rows, alpha=ALPHA / 4)[0]
    assert tighter == menu_lower([[100, 81], [50, 49]], canaries=100, classes=2, alpha=ALPHA / 4)[0] < bound


def test_the_delta_of_the_runs_enters_the_bound():
    plain = pd.DataFrame([_row("gc", 0, [[50, 45]])])
    with_delta = pd.DataFrame([_row("gc", 0, [[50, 45]], delta=1e-3)])
    expected = menu_lower([[50, 45]], canaries=50, classes=2, delta=1e-3)[0]
    assert pooled_lower(with_delta)[0] == expected < pooled_lower(plain)[0]


def test_nothing_guessed_is_no_bound():
    bound, guesses, accuracy, fdp = pooled_lower(pd.DataFrame([_row("gc", 0, None)]))
    assert math.isnan(bound) and guesses == 0 and math.isnan(accuracy) and math.isnan(fdp)


def test_a_bound_of_zero_reports_every_guess_and_their_accuracy():
    bound, guesses, accuracy, _ = pooled_lower(pd.DataFrame([_row("gc", 0, [[40, 20], [20, 10]])]))
    assert bound == 0.0 and guesses == 40 and accuracy == 0.5


def test_the_table_takes_the_worst_case_at_the_bonferroni_level_and_tests_the_weakest_claim_there():
    strong = [[50, 49], [25, 25]]
    weak = [[50, 30], [25, 16]]
    runs = [_row(a, s, c, epsilon=e) for s, e in ((0, 1.0), (1, 2.0)) for a, c in (("gc", strong), ("mc", weak))]
    runs += [_row("gc", 2, strong, status="failed"), _row("mc", 3, strong, canaries=0)]  # neither counts
    table = epsilon_table(pd.DataFrame(runs))
    by = {r["attack"]: r for r in table.to_dict("records")}
    assert set(by) == {"gc", "mc", "worst-case"}
    gc = pooled_lower(pd.DataFrame(runs[0:1] + runs[2:3]))
    assert by["gc"]["epsilon_lower"] == gc[0] and by["gc"]["seeds"] == 2
    worst = pooled_lower(pd.DataFrame(runs[0:1] + runs[2:3]), alpha=ALPHA / 2)[0]
    assert by["worst-case"]["epsilon_lower"] == worst < gc[0] and by["worst-case"]["strongest"] == "gc"
    assert all(r["epsilon_claimed"] == 2.0 for r in by.values())  # each training must hold its own: the weakest
    assert by["worst-case"]["rejected"] == (worst > 2.0) and not by["gc"]["rejected"] and not by["mc"]["rejected"]
    assert (by["gc"]["axis"], by["gc"]["stronger"]) == ("epsilon", "lower")


def test_each_setting_has_its_own_rows_and_a_claim_above_the_cap_is_untestable():
    runs = [_row("gc", 0, [[50, 49]], strength=s, epsilon=e) for s, e in ((1.0, 0.5), (8.0, 50.0))]
    table = epsilon_table(pd.DataFrame(runs)).set_index(["strength", "attack"])
    assert bool(table.loc[(1.0, "worst-case"), "rejected"]) is True and not table.loc[(1.0, "gc"), "rejected"]
    assert not table.loc[(8.0, "worst-case"), "testable"] and not table.loc[(8.0, "worst-case"), "rejected"]
    assert table.loc[(8.0, "worst-case"), "strongest"] == "gc"


def test_no_canaries_no_table():
    assert epsilon_table(pd.DataFrame([_row("gc", 0, [[50, 49]], canaries=0)])).empty


def test_the_claim_test_agrees_with_the_bound_at_its_edge():
    """The bound is the largest epsilon rejected: a claim at it is rejected, one just above it is not."""
    bound = pooled_lower(pd.DataFrame([_row("gc", 0, [[50, 49]])]))[0]
    for claim, rejected in ((bound, True), (bound + 1e-9, False)):
        table = epsilon_table(pd.DataFrame([_row("gc", 0, [[50, 49]], epsilon=claim)])).set_index("attack")
        assert bool(table.loc["worst-case", "rejected"]) is rejected


def test_the_strongest_attack_named_does_not_depend_on_the_order_of_the_records():
    runs = [_row(a, 0, [[50, 49]]) for a in ("gc", "mc", "norm")]  # one bound for all three: a tie
    named = {epsilon_table(pd.DataFrame(order)).set_index("attack").loc["worst-case", "strongest"]
             for order in (runs, runs[::-1], runs[1:] + runs[:1])}
    assert len(named) == 1


def test_seeds_counts_distinct_seeds():
    runs = [_row("gc", 0, [[50, 49]]), _row("gc", 0, [[50, 48]]), _row("gc", 1, [[50, 47]])]
    assert epsilon_table(pd.DataFrame(runs)).set_index("attack").loc["gc", "seeds"] == 2


def test_the_delta_term_charges_c_equal_to_the_class_count_beyond_two_by_hand():
    from scipy.stats import binom

    from vflpriv.common.empirical_epsilon import p_value, right_guess_bound

    guesses, right, canaries, eps, delta, classes = 5, 3, 8, 1.5, 0.001, 10
    q = right_guess_bound(eps, classes)
    tail = binom.sf(right - 1, guesses, q)
    pmf = [binom.pmf(k, guesses, q) for k in range(guesses + 1)]
    shift = max(sum(pmf[right - i:right]) / i for i in range(1, right + 1))
    assert p_value(guesses=guesses, right=right, canaries=canaries, classes=classes, epsilon=eps,
                   delta=delta) == pytest.approx(tail + delta * classes * canaries * shift)
    assert p_value(guesses=guesses, right=0, canaries=canaries, classes=classes, epsilon=eps, delta=delta) == 1.0
    one = p_value(guesses=guesses, right=1, canaries=canaries, classes=classes, epsilon=eps, delta=delta)
    assert one == pytest.approx(binom.sf(0, guesses, q) + delta * classes * canaries * pmf[0])  # i = 1 = right


@pytest.mark.parametrize(("guesses", "right", "canaries"), [(5, 6, 10), (11, 3, 10), (3, -1, 10)])
def test_impossible_counts_are_refused(guesses, right, canaries):
    from vflpriv.common.empirical_epsilon import p_value

    with pytest.raises(ValueError, match="need 0 <= right <= guesses <= canaries"):
        p_value(guesses=guesses, right=right, canaries=canaries, classes=2, epsilon=1.0)


def test_a_larger_delta_certifies_less_and_a_p_value_never_exceeds_one():
    from vflpriv.common.empirical_epsilon import epsilon_lower, p_value

    bounds = [epsilon_lower(guesses=200, right=190, canaries=200, classes=2, delta=d) for d in (0.0, 1e-4, 1e-2)]
    assert bounds[0] > bounds[1] > bounds[2] >= 0
    assert p_value(guesses=200, right=150, canaries=200, classes=2, epsilon=0.1, delta=0.5) == 1.0


def test_the_menu_keeps_at_least_one_guess_and_drops_repeats():
    from vflpriv.common.empirical_epsilon import kept

    assert kept(1) == [1] and kept(2) == [2, 1] and kept(10) == [10, 5, 3, 1] and kept(40) == [40, 20, 10, 4]


def test_an_attack_that_guessed_none_has_no_bound_but_counts_among_the_planned():
    runs = [_row("gc", 0, [[1, 1]], canaries=1), _row("mc", 0, None, canaries=1)]
    table = epsilon_table(pd.DataFrame(runs)).set_index("attack")
    assert math.isnan(table.loc["mc", "epsilon_lower"]) and table.loc["gc", "canary_guesses"] == 1
    assert table.loc["worst-case", "strongest"] == "gc" and table.loc["worst-case", "planned_attacks"] == 2


def test_a_setting_with_an_empty_field_keeps_its_rows():
    """A results.csv read back has NaN where a field was empty (a phase-less method's runs): still a setting."""
    runs = [_row("gc", 0, [[50, 49]], strength=float("nan"))]
    assert set(epsilon_table(pd.DataFrame(runs))["attack"]) == {"gc", "worst-case"}


def test_a_menu_of_one_entry_is_that_entry_s_bound_at_the_full_level_and_no_menu_is_no_bound():
    from vflpriv.common.empirical_epsilon import epsilon_lower

    single = epsilon_lower(guesses=50, right=48, canaries=50, classes=2)
    assert menu_lower([[50, 48]], canaries=50, classes=2) == (single, 50) and single > 0
    assert menu_lower([], canaries=50, classes=2) == (0.0, 0)


def test_a_delta_of_one_rejects_nothing():
    """(eps, 1)-DP holds for every mechanism: no count can reject it, at any epsilon."""
    from vflpriv.common.empirical_epsilon import epsilon_lower, p_value

    assert p_value(guesses=50, right=50, canaries=50, classes=2, epsilon=0.0, delta=1.0) == 1.0
    assert epsilon_lower(guesses=50, right=50, canaries=50, classes=2, delta=1.0) == 0.0


def test_the_worst_case_divides_alpha_by_every_planned_attack_not_only_those_that_guessed():
    """mc guessed no canary, and norm failed: both were planned, so gc's bound in the worst case is at 5%/3."""
    runs = [_row("gc", 0, [[50, 49]]), _row("mc", 0, None), _row("norm", 0, [[50, 49]], status="failed")]
    worst = epsilon_table(pd.DataFrame(runs)).set_index("attack").loc["worst-case"]
    assert worst["planned_attacks"] == 3
    assert worst["epsilon_lower"] == menu_lower([[50, 49]], canaries=50, classes=2, alpha=ALPHA / 3)[0]


def test_the_cap_is_every_canary_right_at_the_menu_and_attack_shares_by_hand():
    """Every guess right: the bound solves q^m = alpha / (menu x attacks), q = e^eps / (e^eps + C - 1)."""
    from vflpriv.common.empirical_epsilon import cap

    for m, classes, menu, attacks in ((100, 2, 4, 1), (1000, 2, 4, 1), (75, 10, 4, 10), (60, 10, 1, 2)):
        q = (ALPHA / (menu * attacks)) ** (1 / m)
        assert cap(canaries=m, classes=classes, menu=menu, attacks=attacks) == pytest.approx(
            math.log((classes - 1) * q / (1 - q)), abs=1e-6)
    assert cap(canaries=100, classes=2) == pytest.approx(3.11, abs=0.005)  # the README's caps, with the menu
    assert cap(canaries=1000, classes=2) == pytest.approx(5.43, abs=0.005)


def test_a_claim_of_two_needs_the_fewest_canaries_whose_cap_exceeds_it():
    from vflpriv.common.canary_bound import canaries_needed
    from vflpriv.common.empirical_epsilon import cap

    for classes, attacks in ((10, 10), (2, 10), (2, 1)):
        n = canaries_needed(2.0, classes=classes, attacks=attacks)
        assert cap(canaries=n, classes=classes, attacks=attacks) > 2.0 >= cap(canaries=n - 1, classes=classes,
                                                                               attacks=attacks)
    assert canaries_needed(2.0, classes=10, attacks=10) == 9 and canaries_needed(2.0, classes=2, attacks=10) == 53


def test_a_claim_at_or_above_the_cap_is_untestable_even_when_every_guess_is_right():
    from vflpriv.common.empirical_epsilon import cap

    ceiling = cap(canaries=60, classes=10, menu=2, attacks=1)
    for claim, testable in ((ceiling - 0.01, True), (ceiling, False), (ceiling + 1, False)):
        row = epsilon_table(pd.DataFrame([_row("gc", 0, [[60, 60], [30, 30]], canaries=60, classes=10,
                                               epsilon=claim)])).set_index("attack").loc["worst-case"]
        assert row["cap"] == pytest.approx(ceiling) and bool(row["testable"]) is testable
        assert bool(row["rejected"]) is testable  # every guess right rejects any testable claim, and only those


def test_holm_rejects_step_down_by_hand():
    from vflpriv.tradeoff.epsilon import holm

    # alpha / 4, / 3, / 2, / 1 = 0.0125, 0.0167, 0.025, 0.05: the first two pass, the third (0.03 > 0.025) stops it
    assert holm([0.03, 0.01, 0.015, 0.04]) == [False, True, True, False]
    assert holm([0.2, 0.001]) == [False, True] and holm([]) == []
    assert holm([0.05]) == [True] and holm([0.0501]) == [False]


def test_a_true_claim_among_many_is_rejected_in_at_most_5_percent_of_tables():
    """An exact reader of randomised response (each guess right with probability exactly e^eps / (e^eps + C - 1)),
    beside a chance guesser, in 20 settings of 3 seeds x 25 ten-class canaries at a true claim: over 800 simulated
    tables the chance of rejecting any claim is at most 5% (plus Monte Carlo slack) with Holm's correction, and far
    above it when each setting is tested at 5% alone (the rule this replaces)."""
    import numpy as np

    from vflpriv.common.empirical_epsilon import right_guess_bound
    from vflpriv.tradeoff.epsilon import claim_test, holm

    rng = np.random.default_rng(11)
    classes, seeds, canaries, cells, tables = 10, 3, 25, 20, 800
    claims = np.tile([0.5, 1.0, 2.0, 3.0], cells // 4)
    family, alone = 0, 0
    for _ in range(tables):
        p_values = []
        for eps in claims:
            exact = int(rng.binomial(seeds * canaries, right_guess_bound(float(eps), classes)))
            chance = int(rng.binomial(seeds * canaries, 1 / classes))
            test = claim_test({"exact": ([[seeds * canaries, exact]], seeds * canaries),
                               "chance": ([[seeds * canaries, chance]], seeds * canaries)},
                              planned=2, classes=classes, claim=float(eps), delta=0.0)
            assert test.testable
            p_values.append(test.p_value)
        family += any(holm(p_values))
        alone += any(p < ALPHA for p in p_values)
    slack = 2 * math.sqrt(0.05 * 0.95 / tables)
    assert family / tables <= ALPHA + slack
    assert alone / tables > 2 * ALPHA  # the uncorrected per-setting rule flags a true claim somewhere far more often


def test_a_feature_attack_of_the_same_training_is_not_a_planned_guesser_of_the_canaries():
    runs = [_row("gc", 0, [[50, 49]]), _row("mc", 0, None), {**_row("fi-decoder", 0, None), "secret": "features"}]
    runs[0]["secret"] = runs[1]["secret"] = "labels"
    worst = epsilon_table(pd.DataFrame(runs)).set_index("attack").loc["worst-case"]
    assert worst["planned_attacks"] == 2


def test_several_adversaries_of_one_seed_are_guessers_of_their_own_never_pooled_together():
    """--all-adversaries: parties 1 and 2 guess the same canaries of a seed; each is a guesser of its own (pooled over
    seeds, its own Bonferroni share), so two of them never make 100 canaries of one seed's 50."""
    counts = [[50, 40], [25, 24]]
    runs = [{**_row("gc", s, counts), "adversary": a} for s in (0, 1) for a in ("1", "2")]
    by = {r["attack"]: r for r in epsilon_table(pd.DataFrame(runs)).to_dict("records")}
    assert set(by) == {"gc by party 1", "gc by party 2", "worst-case"}
    assert by["gc by party 1"]["canaries"] == 100 and by["worst-case"]["planned_attacks"] == 2
    alone = pooled_lower(pd.DataFrame(runs[0::2]), alpha=ALPHA / 2)[0]
    assert by["worst-case"]["epsilon_lower"] == alone
    one = [{**r, "adversary": "1"} for r in runs[0::2]]  # a single adversary: named by its attack, as before
    assert set(epsilon_table(pd.DataFrame(one))["attack"]) == {"gc", "worst-case"}


def test_adversaries_kept_apart_as_variants_are_named_by_their_attack_alone():
    """An audit's report gives each --all-adversaries adversary its own variant (setting): one adversary per setting,
    so each setting's guessers are its attacks, at its own Bonferroni share."""
    runs = [{**_row("gc", s, [[50, 40]]), "adversary": a, "variant": f"partition.adversary={a}"}
            for s in (0, 1) for a in ("1", "2")]
    table = epsilon_table(pd.DataFrame(runs))
    assert set(table["attack"]) == {"gc", "worst-case"}
    assert set(table.loc[table["attack"] == "worst-case", "planned_attacks"]) == {1}
