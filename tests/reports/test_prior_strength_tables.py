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
    return {**base, "attack": "fi-decoder", "feature_mse": 0.08 - leak, "prior_mse": 0.08, "victim": "1",
            "adversary": "0"}


def test_each_secret_gets_its_table_with_the_weakest_strength_that_falls_to_the_prior():
    rows = [_row("labels", s, seed, leak=leak) for s, leak in ((1, 0.30), (5, 0.01), (25, 0.0)) for seed in (0, 1)]
    rows += [_row("features", s, seed, leak=leak) for s, leak in ((1, 0.03), (2, 0.005), (4, 0.003)) for seed in (0, 1)]
    rows += [_row("labels", 0.0, 0, leak=0.4) | {"defense": "none"}]
    labels, features = prior_strength_tables(pd.DataFrame(rows))
    assert labels.title.startswith("labels") and features.title.startswith("features")
    assert labels.rows == [["splitnn", "digits", "mc", "d", "finetune", "λ=5 (leakage +0.0100, utility 0.850)"]]
    # features: judged as the report's feature table judges them (tests/reports/test_feature_tables.py): no
    # undefended feature run here, so no strength is credited to the defense
    assert features.rows == [["splitnn", "digits", "fi-decoder", "d", "finetune", "0", "1",
                              "n/a: no undefended run of this configuration"]]


def test_a_label_attack_that_did_not_leak_undefended_credits_no_defense_with_falling_to_the_prior():
    """Review fin F1 (its label half): the table named the weakest strength "at which mc falls to the prior" where mc
    read "no" without the defense, as the audit's Defenses table (UNDEFENDED_AT_PRIOR) does not."""
    defended = [_row("labels", s, seed, leak=leak) for s, leak in ((1, 0.0), (5, 0.0)) for seed in (0, 1, 2)]
    plain = [_row("labels", 0.0, seed, leak=leak) | {"defense": "none"} for seed, leak in enumerate((0.0, -0.01, 0.0))]
    (labels,) = prior_strength_tables(pd.DataFrame(defended + plain))
    assert labels.rows[0][-1] == "n/a: no leakage beyond the prior without a defense"
    leaky = [_row("labels", 0.0, seed, leak=0.3 + seed / 100) | {"defense": "none"} for seed in (0, 1, 2)]
    (labels,) = prior_strength_tables(pd.DataFrame(defended + leaky))
    assert labels.rows[0][-1].startswith("λ=1 ")


def test_a_sweep_that_never_gets_there_says_so_and_lower_is_stronger_is_read_weak_to_strong():
    rows = [_row("labels", s, 0, leak=0.2, stronger="lower") for s in (8, 2, 1)]
    (labels,) = prior_strength_tables(pd.DataFrame(rows))
    assert labels.rows[0][-1] == "not within λ=1, λ=2, λ=8"
    rows = [_row("labels", s, 0, leak=leak, stronger="lower") for s, leak in ((8, 0.3), (2, 0.01), (1, 0.0))]
    (labels,) = prior_strength_tables(pd.DataFrame(rows))
    assert labels.rows[0][-1].startswith("λ=2 ")
