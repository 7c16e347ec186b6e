"""The worst case over attacks from records that hold no prior column (a paper's own table, records written before
priors, a user's frame): the strongest attack alone, and no prior named or subtracted."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from vflpriv.tradeoff.cap import cap_table
from vflpriv.tradeoff.worst_case import worst_case_runs


def _records() -> pd.DataFrame:
    acc = {(0, 1): (0.9, 0.6), (0, 5): (0.4, 0.7), (1, 1): (0.3, 0.2), (1, 5): (0.55, 0.5)}
    utility = {(0, 1): 0.8, (0, 5): 0.6, (1, 1): 0.9, (1, 5): 0.7}
    return pd.DataFrame([dict(method="m", dataset="d", attack=name, defense="iso", phase="finetune", strength=s,
                              seed=seed, utility=utility[seed, s], attack_accuracy=acc[seed, s][i], status="ok",
                              utility_metric="accuracy")
                         for (seed, s) in acc for i, name in enumerate("AB")])


def test_without_a_prior_column_the_worst_case_is_the_strongest_attack_and_names_no_prior():
    worst = worst_case_runs(_records()).set_index(["seed", "strength"])
    assert worst["strongest"].to_dict() == {(0, 1): "A", (0, 5): "B", (1, 1): "A", (1, 5): "A"}
    assert worst["attack_accuracy"].to_dict() == {(0, 1): 0.9, (0, 5): 0.7, (1, 1): 0.3, (1, 5): 0.55}
    assert worst["prior_accuracy"].isna().all() and worst["leakage"].isna().all()


def test_without_a_prior_column_the_worst_case_cap_is_computed_by_hand():
    table = cap_table(_records()).set_index("attack")
    seed0 = (0.8 * (1 - 0.9) + 0.6 * (1 - 0.7)) / 2
    seed1 = (0.9 * (1 - 0.3) + 0.7 * (1 - 0.55)) / 2
    assert table.loc["worst-case", "cap"] == pytest.approx((seed0 + seed1) / 2)
    assert not math.isnan(table.loc["A", "cap"])
