"""The claim test's and the epsilon table's edges (``vflpriv.tradeoff.epsilon``), each written for a mutant the mutation
scheme left alive: a claim no attack's guesses reach, Holm's p-values at 0 and 1, a menu's accuracy over every
guess, a DP defense's reason for recording no epsilon."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from vflpriv.tradeoff.epsilon import claim_test, epsilon_table, holm


def _row(attack: str, counts, *, seed: int = 0, notes: str = "") -> dict:
    return dict(method="m", dataset="d", defense="dp-gaussian", phase="finetune", strength=1.0, attack=attack,
                seed=seed, status="ok", canaries=100, canary_counts=json.dumps(counts) if counts else "",
                num_classes=10, epsilon=float("nan"), epsilon_lower_delta=0.0, strength_axis="sigma",
                strength_stronger="higher", notes=notes)


def test_a_claim_no_attack_guessed_for_is_neither_testable_nor_rejected():
    """Every planned attack guessed nothing: p-value 1, no attack, no counts, no cap (NaN)."""
    test = claim_test({"gc": ([], 0), "mc": ([], 0)}, planned=2, classes=10, claim=1.0, delta=0.0)
    assert (test.p_value, test.attack, test.guesses, test.right, test.canaries) == (1.0, "", 0, 0, 0)
    assert math.isnan(test.cap) and not test.testable


def test_holm_takes_p_values_of_exactly_0_and_1():
    assert holm([0.0, 1.0]) == [True, False]
    for bad in (-1e-9, 1 + 1e-9, float("nan")):
        with pytest.raises(ValueError, match="p_values must be numbers in"):
            holm([0.01, bad])


def test_the_accuracy_over_every_guess_is_the_first_menu_entry_s():
    """canary_accuracy_all: right / kept of the menu's first entry (every guess), not of another entry."""
    table = epsilon_table(pd.DataFrame([_row("gc", [[100, 60], [50, 40], [25, 24], [10, 10]])])).set_index("attack")
    assert table.loc["gc", "canary_accuracy_all"] == 0.6


def test_a_defense_s_reason_for_no_epsilon_is_the_note_that_says_so():
    """The runs' notes hold several; the claim note is the one naming no epsilon, without its neighbours."""
    note = "dp-gaussian: no epsilon recorded (the method trains on clean labels before the private loop)"
    rows = [_row("gc", [[100, 60]], notes=f"tuned on validation; {note}"), _row("gc", [[100, 61]], seed=1)]
    table = epsilon_table(pd.DataFrame(rows))
    assert set(table["claim_note"]) == {note}


def test_pair_canaries_are_scored_with_their_two_candidates_and_the_rejecting_counts_are_recorded():
    """canary_classes 2 on a ten-class dataset (pair canaries): the table's C is 2, not num_classes; a claim of 0.5
    against 95 of 100 binary guesses is rejected by those counts, one family of one claim."""
    rows = [_row("gc", [[100, 95]]) | {"canary_classes": 2, "epsilon": 0.5, "epsilon_delta": 0.0}]
    table = epsilon_table(pd.DataFrame(rows)).set_index("attack")
    worst = table.loc["worst-case"]
    assert (table["classes"] == 2).all()
    assert bool(worst["rejected"]) and (worst["rejecting_guesses"], worst["rejecting_right"]) == (100, 95)
    assert (table["holm_family"] == 1).all()


def test_two_stacked_defenses_without_an_epsilon_name_the_first_in_the_stack():
    first, second = "dp-gaussian: no epsilon recorded: x", "label-dp: no epsilon recorded: y"
    table = epsilon_table(pd.DataFrame([_row("gc", [[100, 60]], notes=f"{first}; {second}")]))
    assert set(table["claim_note"]) == {first}


def test_a_claim_test_with_no_attack_planned_is_refused_naming_planned():
    """No attack planned, none given: no Bonferroni share to test a claim at (planned must be at least 1)."""
    with pytest.raises(ValueError, match=r"\bplanned\b"):
        claim_test({}, planned=0, classes=10, claim=1.0, delta=0.0)


def test_a_tie_between_attacks_names_the_first_given():
    """Two attacks with the same counts reject a claim with the same p-value: the test names the first given (the
    records' order in a table), so the same records always print the same rejecting attack."""
    attacks = {"mc": ([[100, 95]], 100), "gc": ([[100, 95]], 100)}
    test = claim_test(attacks, planned=2, classes=2, claim=0.1, delta=0.0)
    assert test.p_value < 0.05 and (test.attack, test.guesses, test.right) == ("mc", 100, 95)
    rows = [_row(a, [[100, 95]]) | {"canary_classes": 2, "epsilon": 0.1, "epsilon_delta": 0.0} for a in ("mc", "gc")]
    worst = epsilon_table(pd.DataFrame(rows)).set_index("attack").loc["worst-case"]
    assert worst["rejecting_attack"] == "mc" and bool(worst["rejected"])


def test_the_table_carries_the_bounds_delta_and_the_worst_case_s_seeds():
    rows = [_row("gc", [[100, 60]], seed=s) | {"epsilon_lower_delta": 1e-5} for s in range(3)]
    table = epsilon_table(pd.DataFrame(rows)).set_index("attack")
    assert (table["epsilon_lower_delta"] == 1e-5).all()
    assert table.loc["worst-case", "seeds"] == 3 and table.loc["gc", "seeds"] == 3


def test_adversaries_are_kept_apart_in_a_setting_without_a_strength():
    """A setting whose strength is NaN (no defense): its two adversaries' records are still two guessers, never
    pooled (a NaN group key is a group like any other)."""
    rows = [_row("gc", [[100, 60]]) | {"defense": "none", "strength": float("nan"), "adversary": str(p)}
            for p in (1, 2)]
    table = epsilon_table(pd.DataFrame(rows))
    assert set(table["attack"]) == {"gc by party 1", "gc by party 2", "worst-case"}
    assert (table.set_index("attack").loc[["gc by party 1", "gc by party 2"], "canaries"] == 100).all()
