"""The auditor's table by hand (``tradeoff.auditing.auditor_table``): each row's fields from the pooled counts, failed
runs left out, a setting with an empty field kept, a claim without a delta bounded at delta 0, the weakest claim of
the setting tested (its check by hand from ``claim_test``)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from vflpriv.common.empirical_epsilon import menu_lower
from vflpriv.common.fdp_one_run import fdp_bounds
from vflpriv.tradeoff.auditing import auditor_table
from vflpriv.tradeoff.epsilon import claim_test


def _record(seed: int, counts: str, **changes) -> dict:
    return {**dict(method="m", dataset="d", defense="dp-gaussian", phase="finetune", strength=4.0, attack="gc",
                   seed=seed, status="ok", canaries=50, num_classes=10, epsilon=2.0 + seed, epsilon_delta=1e-5,
                   strength_axis="sigma", training_key=f"t{seed}", auditor="gradient-lrt", auditor_counts=counts),
            **changes}


def test_a_row_is_the_pooled_bound_its_guesses_their_accuracy_and_the_setting_by_hand():
    frame = pd.DataFrame([_record(0, "[[50, 30], [10, 9]]"), _record(1, "[[50, 26], [10, 10]]")])
    (row,) = auditor_table(frame).to_dict("records")
    bound, guesses = menu_lower([[100, 56], [20, 19]], canaries=100, classes=10, delta=1e-5)
    right = {100: 56, 20: 19}[guesses]
    test = claim_test({"gradient-lrt": ([[100, 56], [20, 19]], 100)}, planned=1, classes=10, claim=3.0, delta=1e-5)
    assert test.testable
    fdp = fdp_bounds([[100, 56], [20, 19]], canaries=100, classes=10, delta=1e-5)  # ten classes: the k-ary f-DP bounds
    assert row == {"method": "m", "dataset": "d", "defense": "dp-gaussian", "phase": "finetune", "variant": "",
                   "strength": 4.0, "auditor": "gradient-lrt", "axis": "sigma", "epsilon_lower": bound, "delta": 1e-5,
                   "canary_guesses": guesses, "canary_accuracy": right / guesses, "canaries": 100, "seeds": 2,
                   "epsilon_claimed": 3.0, "classes": 10, "cap": test.cap, "testable": True,
                   "p_value": test.p_value, "rejected": test.p_value <= 0.05, "rejecting_guesses": test.guesses,
                   "rejecting_right": test.right, "rejecting_test": "f-DP", "holm_family": 1, "auditor_options": "",
                   **dict(zip(("epsilon_fdp", "mu_lower", "epsilon_gdp_estimate"), fdp))}  # the weakest claim (seed 1's 3.0) is tested


def test_the_accuracy_is_that_of_the_menu_entry_the_bound_chose():
    frame = pd.DataFrame([_record(0, "[[50, 10], [5, 5]]"), _record(1, "[[50, 12], [5, 5]]")])
    (row,) = auditor_table(frame).to_dict("records")
    assert row["canary_guesses"] == 10 and row["canary_accuracy"] == 1.0  # the few sure guesses certify most


def test_failed_runs_are_left_out_and_a_setting_with_an_empty_field_is_kept():
    failed = _record(1, "[[50, 50]]", status="failed")
    frame = pd.DataFrame([_record(0, "[[50, 30]]"), failed])
    (row,) = auditor_table(frame).to_dict("records")
    assert row["canaries"] == 50 and row["seeds"] == 1
    assert row["epsilon_lower"] == menu_lower([[50, 30]], canaries=50, classes=10, delta=1e-5)[0]
    solved = pd.DataFrame([_record(0, "[[50, 30]]", strength=math.nan)])  # e.g. a strength solved for a target
    assert len(auditor_table(solved)) == 1


def test_a_claim_without_a_delta_is_bounded_at_delta_zero():
    frame = pd.DataFrame([_record(0, "[[50, 45]]", epsilon_delta=math.nan)])
    (row,) = auditor_table(frame).to_dict("records")
    assert row["delta"] == 0.0
    assert row["epsilon_lower"] == pytest.approx(menu_lower([[50, 45]], canaries=50, classes=10, delta=0.0)[0])
    assert row["epsilon_lower"] > 0


def test_records_without_an_auditor_column_or_without_records_give_an_empty_table():
    plain = pd.DataFrame([_record(0, "[[50, 30]]")]).drop(columns=["auditor", "auditor_counts"])
    assert auditor_table(plain).empty and auditor_table(pd.DataFrame(columns=["auditor", "status"])).empty


def test_each_variant_of_a_setting_is_a_row_of_its_own():
    frame = pd.DataFrame([_record(0, "[[50, 30]]", variant="a"), _record(1, "[[50, 26]]", variant="b")])
    table = auditor_table(frame)
    assert table["variant"].tolist() == ["a", "b"] and table["canaries"].tolist() == [50, 50]


def test_a_setting_without_a_claim_is_neither_testable_nor_rejected():
    (row,) = auditor_table(pd.DataFrame([_record(0, "[[50, 50]]", epsilon=math.nan)])).to_dict("records")
    assert row["testable"] is False and row["rejected"] is False and row["holm_family"] == 0
