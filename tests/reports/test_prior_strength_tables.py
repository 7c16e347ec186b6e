"""`vflpriv table` gives, per secret, the weakest strength of each swept defense at which each attack falls to the
adversary's prior: the first strength, weak to strong on the defense's axis, whose mean leakage is within the margin."""

from __future__ import annotations

import pandas as pd

from vflpriv.reports.leakage import prior_strength_tables


def _row(secret: str, strength: float, seed: int, *, leak: float, stronger: str = "higher") -> dict:
    base = {"method": "splitnn", "dataset": "digits", "defense": "d", "phase": "finetune", "strength": strength,
            "seed": seed, "status": "ok", "utility": 0.9 - strength / 100, "strength_axis": "lambda",
            "strength_stronger": stronger, "secret": secret}
    if secret == "labels":
        return {**base, "attack": "mc", "attack_accuracy": 0.5 + leak, "prior_accuracy": 0.5, "victim": ""}
    return {**base, "attack": "fi-decoder", "feature_mse": 0.08 - leak, "prior_mse": 0.08, "victim": "1"}


def test_each_secret_gets_its_table_with_the_weakest_strength_that_falls_to_the_prior():
    rows = [_row("labels", s, seed, leak=leak) for s, leak in ((1, 0.30), (5, 0.01), (25, 0.0)) for seed in (0, 1)]
    rows += [_row("features", s, seed, leak=leak) for s, leak in ((1, 0.03), (2, 0.005), (4, 0.003)) for seed in (0, 1)]
    rows += [_row("labels", 0.0, 0, leak=0.4) | {"defense": "none"}]
    labels, features = prior_strength_tables(pd.DataFrame(rows))
    assert labels.title.startswith("labels") and features.title.startswith("features")
    assert labels.rows == [["splitnn", "digits", "mc", "d", "finetune", "λ=5 (leakage +0.0100, utility 0.850)"]]
    # features: within 5% of the prior's MSE (0.004): 2 leaks 0.005 (out), 4 leaks 0.003 (in)
    assert features.rows == [["splitnn", "digits", "fi-decoder", "d", "finetune", "1",
                              "λ=4 (leakage +0.0030 MSE, utility 0.860)"]]


def test_a_sweep_that_never_gets_there_says_so_and_lower_is_stronger_is_read_weak_to_strong():
    rows = [_row("labels", s, 0, leak=0.2, stronger="lower") for s in (8, 2, 1)]
    (labels,) = prior_strength_tables(pd.DataFrame(rows))
    assert labels.rows[0][-1] == "not within λ=1, λ=2, λ=8"
    rows = [_row("labels", s, 0, leak=leak, stronger="lower") for s, leak in ((8, 0.3), (2, 0.01), (1, 0.0))]
    (labels,) = prior_strength_tables(pd.DataFrame(rows))
    assert labels.rows[0][-1].startswith("λ=2 ")
