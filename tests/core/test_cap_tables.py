"""The tables built on CAP and DCS, by hand: which run is a defended run's undefended reference, CAP per seed, what a
table's status says, T-DCS, the per-strength summary."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from vflpriv.tradeoff.cap import cap_table, reference_utility, seed_caps, strength_summary, t_dcs
from vflpriv.tradeoff.worst_case import WORST, worst_case_runs

SETTING = dict(method="m", dataset="d", phase="finetune")


def _config(attack: str = "mc", seed: int = 0, lr: float = 0.1) -> str:
    return json.dumps({"seed": seed, "finetune": {"lr": lr}, "attack": {"name": attack}, "defenses": [{"name": "iso"}]})


def _row(**fields) -> dict:
    base = dict(**SETTING, attack="mc", defense="iso", strength=1.0, strength_identity=0.0, seed=0, status="ok",
                utility=0.5, attack_accuracy=0.5, num_classes=2, config=_config(), training_under_attack=False)
    return {**base, **fields}


def test_the_reference_is_the_successful_undefended_run_of_the_same_settings_and_seed():
    runs = pd.DataFrame([
        _row(strength=0.0, status="failed", utility=0.1),  # failed at the identity: never a reference
        _row(strength=0.0, utility=0.9),  # the swept defense at its identity
        _row(strength=5.0, utility=0.4),
        _row(defense="none", strength=0.0, utility=0.7, config=_config(seed=1)),  # no defense: seed 1's reference
        _row(strength=5.0, utility=0.3, config=_config(seed=1)),
        _row(strength=5.0, utility=0.2, config=_config(lr=0.5)),  # other settings: no reference
        _row(strength=5.0, utility=0.2, config=""),  # no config: no reference, no error
    ])
    assert reference_utility(runs).tolist()[1:5] == [0.9, 0.9, 0.7, 0.7]
    assert math.isnan(reference_utility(runs).iloc[5]) and math.isnan(reference_utility(runs).iloc[6])


def test_a_passive_attack_shares_the_reference_an_acting_attack_needs_its_own():
    runs = pd.DataFrame([
        _row(strength=0.0, utility=0.9, config=_config("mc")),
        _row(attack="gc", strength=5.0, utility=0.4, config=_config("gc")),  # passive: the mc run's training is its
        _row(attack="mc-active", strength=5.0, utility=0.3, config=_config("mc-active"), training_under_attack=True),
    ])
    reference = reference_utility(runs)
    assert reference.iloc[1] == 0.9 and math.isnan(reference.iloc[2])
    without = runs.drop(columns=["training_under_attack"])  # older records: every attack passive
    assert reference_utility(without).iloc[2] == 0.9


def test_the_identity_defaults_to_zero_where_the_records_do_not_say():
    runs = pd.DataFrame([_row(strength=0.0, utility=0.9), _row(strength=5.0, utility=0.4)]).drop(
        columns=["strength_identity"])
    assert reference_utility(runs).tolist() == [0.9, 0.9]


def test_seed_caps_is_one_cap_per_seed_over_the_group_s_strengths():
    runs = pd.DataFrame([_row(strength=s, seed=seed, utility=u, attack_accuracy=a)
                         for seed, values in ((0, ((1.0, 0.8, 0.5), (5.0, 0.6, 0.25))),
                                              (1, ((1.0, 0.9, 0.4), (5.0, 0.5, 0.5))))
                         for s, u, a in values] + [_row(strength=5.0, seed=2, utility=0.9, attack_accuracy=0.1),
                                                   _row(strength=1.0, seed=2, status="failed")])
    caps = seed_caps(runs, ["method", "attack"])
    assert caps[["seed", "cap"]].values.tolist() == [[0, pytest.approx((0.4 + 0.45) / 2)],
                                                      [1, pytest.approx((0.54 + 0.25) / 2)]]  # seed 2 failed at 1


def test_cap_table_says_what_its_number_covers():
    rows = [_row(strength=s, seed=seed, utility=0.8, attack_accuracy=0.5) for s in (1.0, 5.0) for seed in (0, 1)]
    partial = pd.DataFrame(rows + [_row(strength=1.0, seed=2), _row(strength=5.0, seed=2, status="failed")])
    (row,) = cap_table(partial).to_dict("records")
    assert row["status"].startswith("partial: seeds 2 left out") and row["n_seeds"] == 2 and row["cap"] == 0.4
    none = pd.DataFrame([_row(strength=1.0, seed=0), _row(strength=5.0, seed=1)])
    (row,) = cap_table(none).to_dict("records")
    assert row["status"] == "incomplete: no seed succeeded at every strength (seeds 0, 1)" and math.isnan(row["cap"])
    failed = pd.DataFrame([_row(strength=1.0), _row(strength=5.0, status="failed")])
    (row,) = cap_table(failed).to_dict("records")
    assert row["status"] == "incomplete: strengths 5 failed" and row["n_seeds"] == 0
    na = pd.DataFrame([_row(status="n/a", error="not federated")])
    (row,) = cap_table(na).to_dict("records")
    assert (row["status"], row["n_seeds"]) == ("n/a: not federated", 0) and math.isnan(row["dcs"])


def test_cap_table_keeps_the_order_of_its_groups():
    rows = [_row(method=m, strength=s) for m in ("zeta", "alpha") for s in (1.0, 5.0)]
    assert cap_table(pd.DataFrame(rows))["method"].tolist() == ["zeta", "alpha"]


def test_dcs_of_a_binary_task_and_only_where_every_seed_has_its_reference():
    rows = [_row(strength=s, seed=seed, utility=u, attack_accuracy=a, config=_config(seed=seed))
            for seed in (0, 1) for s, u, a in ((0.0, 0.9, 0.75), (5.0, 0.7, 0.5))]
    (row,) = cap_table(pd.DataFrame(rows)).to_dict("records")
    per_strength = [1 / (1 + math.sqrt(0.5 * 0.5**2)), 1 / (1 + math.sqrt(0.5 * 0.2**2))]  # AP 0.5; dMP 0.2
    assert row["dcs"] == pytest.approx(np.mean(per_strength)) and row["dcs_std"] == pytest.approx(0.0)
    rows[3]["config"] = _config(seed=1, lr=0.5)  # seed 1's defended run has no undefended run of its settings
    (row,) = cap_table(pd.DataFrame(rows)).to_dict("records")
    assert row["n_seeds"] == 2 and math.isnan(row["dcs"])  # one seed without a reference: no DCS at all


def test_t_dcs_averages_the_attacks_not_the_worst_case():
    caps = pd.DataFrame([dict(**SETTING, defense="iso", attack=a, dcs=v)
                         for a, v in (("mc", 0.8), ("gc", 0.6), (WORST, 0.1), ("dli", float("nan")))])
    (row,) = t_dcs(caps).to_dict("records")
    assert row["t_dcs"] == pytest.approx(0.7) and row["attacks"] == "mc, gc"
    assert t_dcs(caps.assign(variant="v"))["variant"].tolist() == ["v"]


def test_strength_summary_means_and_population_stds_per_strength():
    rows = [_row(strength=s, seed=seed, utility=u, attack_accuracy=a, prior_accuracy=p, utility_metric="accuracy",
                 strength_axis="lambda", strength_stronger="higher")
            for seed, values in ((0, ((1.0, 0.8, 0.6, 0.5),)), (1, ((1.0, 0.6, 0.8, 0.5),))) for s, u, a, p in values]
    (row,) = strength_summary(pd.DataFrame(rows)).to_dict("records")
    assert (row["utility_mean"], row["utility_std"]) == (pytest.approx(0.7), pytest.approx(0.1))
    assert (row["leakage_mean"], row["leakage_std"]) == (pytest.approx(0.2), pytest.approx(0.1))
    assert row["n_seeds"] == 2


def test_the_worst_case_row_is_honest_and_without_attack_records_there_is_none():
    (worst,) = worst_case_runs(pd.DataFrame([_row(prior_accuracy=0.3), _row(attack="gc", prior_accuracy=0.3)]
                                            )).to_dict("records")
    assert worst["training_under_attack"] is False and worst["strongest"] in ("mc", "gc")
    assert worst_case_runs(pd.DataFrame([{"method": "m", "utility": 0.5}])).empty


def test_a_worst_case_row_joins_two_attacks_or_more_and_never_one():
    rows = [_row(attack=a, strength=s, attack_accuracy=acc, prior_accuracy=0.3, utility_metric="accuracy")
            for s in (0.0, 5.0) for a, acc in (("mc", 0.6), ("gc", 0.7))]
    table = cap_table(pd.DataFrame(rows))
    assert table["attack"].tolist() == ["mc", "gc", WORST] and table["utility_metric"].tolist() == ["accuracy"] * 3
    worst = table[table["attack"] == WORST].iloc[0]
    assert worst["cap"] == pytest.approx(0.5 * 0.3) and worst["status"] == "ok"
    alone = cap_table(pd.DataFrame([r for r in rows if r["attack"] == "mc"]))
    assert alone["attack"].tolist() == ["mc"]


def test_reference_keys_do_not_depend_on_the_order_of_a_config_s_keys():
    flipped = json.dumps({"defenses": [{"name": "iso"}], "attack": {"name": "mc"}, "finetune": {"lr": 0.1}, "seed": 0})
    runs = pd.DataFrame([_row(strength=0.0, utility=0.9), _row(strength=5.0, utility=0.4, config=flipped)])
    assert reference_utility(runs).tolist() == [0.9, 0.9]


def test_without_a_class_count_there_is_no_dcs_and_no_error():
    rows = [_row(strength=s, utility=u) for s, u in ((0.0, 0.9), (5.0, 0.4))]
    (row,) = cap_table(pd.DataFrame(rows).drop(columns=["num_classes"])).to_dict("records")
    assert math.isnan(row["dcs"]) and row["cap"] == pytest.approx((0.9 * 0.5 + 0.4 * 0.5) / 2)


def test_seed_caps_and_t_dcs_and_the_worst_case_keep_the_order_they_were_given():
    runs = pd.DataFrame([_row(method=m, seed=seed, strength=s) for m in ("zeta", "alpha") for seed in (1, 0)
                         for s in (5.0, 1.0)])
    caps = seed_caps(runs, ["method"])
    assert caps[["method", "seed"]].values.tolist() == [["zeta", 0], ["zeta", 1], ["alpha", 0], ["alpha", 1]]
    scores = t_dcs(pd.DataFrame([dict(**SETTING, defense=d, attack="mc", dcs=0.5) for d in ("mid", "iso")]))
    assert scores["defense"].tolist() == ["mid", "iso"]
    worst = worst_case_runs(pd.DataFrame([_row(attack=a, strength=s, prior_accuracy=0.1) for s in (5.0, 1.0)
                                          for a in ("mc", "gc")]))
    assert worst["strength"].tolist() == [5.0, 1.0]


def test_a_prior_that_scored_nothing_is_no_candidate_and_a_frame_without_attacks_has_no_worst_case():
    (worst,) = worst_case_runs(pd.DataFrame([_row(attack=a, attack_accuracy=acc, prior_accuracy=float("nan"))
                                             for a, acc in (("mc", 0.6), ("gc", 0.4))])).to_dict("records")
    assert (worst["strongest"], worst["attack_accuracy"]) == ("mc", 0.6)
    assert worst_case_runs(pd.DataFrame([{"method": "m", "utility": 0.5}, {"method": "n", "utility": 0.6}])).empty


def test_records_that_hold_their_worst_case_already_get_no_second_one():
    """with_worst_case on its own output (a report re-reading the rows it wrote) adds nothing."""
    from vflpriv.tradeoff.worst_case import with_worst_case

    runs = pd.DataFrame([_row(attack=a, attack_accuracy=acc, prior_accuracy=0.2) for a, acc in (("mc", 0.6), ("gc", 0.7))])
    once = with_worst_case(runs)
    assert (once["attack"] == WORST).sum() == 1 and once.loc[once["attack"] == WORST, "attack_accuracy"].item() == 0.7
    assert len(with_worst_case(once)) == len(once)
    assert with_worst_case(runs.iloc[:1]).equals(runs.iloc[:1])  # one attack: its own tables, no worst case


def _roles_config(attack: str, adversary=None, victim=None) -> str:
    return json.dumps({"seed": 0, "attack": {"name": attack, "adversary": adversary, "victim": victim},
                       "defenses": [{"name": "iso"}]})


def test_a_label_attack_is_not_named_by_the_roles_of_the_feature_attacks_beside_it():
    """An audit's cell holds label attacks (no attack.adversary set) and feature attacks by two adversaries: the
    tables named every label row "(attack.adversary=None, attack.victim=None)"."""
    from vflpriv.tradeoff.variants import with_variants

    runs = pd.DataFrame([_row(attack="mc", secret="labels", config=_roles_config("mc")),
                         _row(attack="gc", secret="labels", config=_roles_config("gc")),
                         _row(attack="fi-decoder", secret="features", config=_roles_config("fi-decoder", 0)),
                         _row(attack="fi-decoder", secret="features", config=_roles_config("fi-decoder", 1, 0))])
    variants = with_variants(runs)["variant"].tolist()
    assert variants[:2] == ["", ""]
    assert variants[2:] == ["", ""]  # a feature record names its roles in its adversary and victim columns


def test_label_records_written_before_the_secret_column_share_a_cell_with_the_new_ones():
    """A store read across versions: label records without ``secret`` (NaN) are label records; grouped apart, an old
    and a new run of one cell got no shared settings compared and lost their variant names."""
    from vflpriv.tradeoff.variants import with_variants

    old = json.dumps({"seed": 0, "attack": {"name": "mc"}, "defenses": [{"name": "iso"}], "partition": {"aux": 40}})
    new = json.dumps({"seed": 0, "attack": {"name": "mc"}, "defenses": [{"name": "iso"}], "partition": {"aux": 80}})
    runs = pd.DataFrame([_row(attack="mc", secret=float("nan"), config=old), _row(attack="mc", secret="labels",
                                                                                   config=new)])
    assert with_variants(runs)["variant"].tolist() == ["partition.aux=40", "partition.aux=80"]


def test_t_dcs_never_averages_a_feature_attack_with_the_label_attacks():
    caps = pd.DataFrame([dict(**SETTING, defense="iso", attack="mc", dcs=0.8, secret="labels", adversary="1",
                              victim=""),
                         dict(**SETTING, defense="iso", attack="fi-decoder", dcs=0.2, secret="features",
                              adversary="0", victim="1")])
    scores = t_dcs(caps)
    assert sorted(zip(scores["attacks"], scores["t_dcs"])) == [("fi-decoder", 0.2), ("mc", 0.8)]
