"""The numbers users publish, each pinned by hand: DCS, the worst case, the audit's verdicts and their direction,
ISO on conv weights, the run keys of two data folders. Each test here failed under a one-line bug of the review of
issue 41 (the bug is named in the test's comment)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from vflpriv.config.schema import RunConfig
from vflpriv.defenses.iso import iso_sigma
from vflpriv.reports.audit import audit_summary
from vflpriv.store.records import RunRecord
from vflpriv.tradeoff.cap import cap_table, dcs
from vflpriv.tradeoff.worst_case import WORST, worst_case_runs

SETTING = dict(method="m", dataset="d", phase="finetune")


def test_dcs_is_one_for_a_chance_attack_without_utility_loss_and_falls_with_either():
    """DCS = 1 / (1 + sqrt(0.5 AP^2 + 0.5 dMP^2)), AP the accuracy above chance over (1 - chance)."""
    ref = np.array([0.9])
    assert dcs(np.array([0.1]), ref, ref, classes=10).item() == 1.0  # chance on 10 classes costs nothing
    assert dcs(np.array([1.0]), ref, ref, classes=10).item() == pytest.approx(1 / (1 + math.sqrt(0.5)))
    assert dcs(np.array([0.55]), ref, ref, classes=10).item() == pytest.approx(1 / (1 + math.sqrt(0.5 * 0.5**2)))
    lost = dcs(np.array([0.5]), np.array([0.7]), ref, classes=2).item()  # chance on 2 classes, 0.2 utility lost
    assert lost == pytest.approx(1 / (1 + math.sqrt(0.5 * 0.2**2)))
    assert dcs(np.array([0.5]), np.array([0.95]), ref, classes=2).item() == 1.0  # a utility gain is no loss
    assert dcs(np.array([0.3]), ref, ref, classes=2).item() == 1.0  # below chance: no attack performance


def test_cap_table_dcs_is_the_mean_over_strengths_against_the_undefended_run_of_the_same_seed():
    config = json.dumps({"dataset": "d", "seed": 0, "defenses": [{"name": "iso"}]})
    rows = [dict(**SETTING, attack="mc", defense="iso", strength=s, strength_identity=0.0, seed=0, status="ok",
                 num_classes=4, utility=u, attack_accuracy=a, config=config)
            for s, u, a in ((0.0, 0.8, 0.7), (1.0, 0.6, 0.25), (5.0, 0.5, 0.4))]
    table = cap_table(pd.DataFrame(rows))
    ap = lambda a: max(0.0, (a - 0.25) / 0.75)  # noqa: E731
    by_hand = np.mean([1 / (1 + math.sqrt(0.5 * ap(a) ** 2 + 0.5 * (0.8 - u) ** 2)) for _, u, a in
                       ((0.0, 0.8, 0.7), (1.0, 0.6, 0.25), (5.0, 0.5, 0.4))])
    assert table["dcs"].item() == pytest.approx(by_hand)
    assert table["cap"].item() == pytest.approx(np.mean([0.8 * 0.3, 0.6 * 0.75, 0.5 * 0.6]))


def _run(attack: str, accuracy: float, *, utility: float, under_attack: bool = False, status: str = "ok",
         prior: float = 0.3) -> dict:
    return dict(**SETTING, attack=attack, defense="iso", strength=1.0, seed=0, status=status, utility=utility,
                attack_accuracy=accuracy, prior_accuracy=prior, training_under_attack=under_attack)


@pytest.mark.parametrize("order", [(0, 1, 2, 3), (3, 2, 1, 0), (1, 3, 0, 2)])
def test_worst_case_takes_the_honest_training_s_utility_in_any_record_order_and_ignores_failed_attacks(order):
    runs = [_run("mc-active", 0.9, utility=0.4, under_attack=True),  # acts in training: a federation of its own
            _run("mc", 0.6, utility=0.8),
            _run("gc", 0.99, utility=0.8, status="failed"),  # a failed run is no candidate
            _run("dli", float("nan"), utility=0.8)]  # an attack that scored nothing is no candidate
    (worst,) = worst_case_runs(pd.DataFrame([runs[i] for i in order])).to_dict("records")
    assert (worst["attack"], worst["strongest"], worst["attack_accuracy"]) == (WORST, "mc-active", 0.9)
    assert worst["utility"] == 0.8 and worst["leakage"] == pytest.approx(0.6)


def test_worst_case_falls_back_on_the_prior_when_it_beats_every_attack():
    (worst,) = worst_case_runs(pd.DataFrame([_run("mc", 0.2, utility=0.8, prior=0.35),
                                             _run("gc", 0.25, utility=0.8, prior=0.35)])).to_dict("records")
    assert (worst["strongest"], worst["attack_accuracy"], worst["leakage"]) == ("prior", 0.35, 0.0)


def _audit_records(hits: dict[str, tuple[str, str]], *, seeds=(0, 1, 2)) -> pd.DataFrame:
    """Undefended audit records with per-target outcomes (attack, prior) per attack, the same on every seed."""
    config = json.dumps({"partition": {"adversary": 1}})
    rows = []
    for attack, (attack_hits, prior_hits) in hits.items():
        for seed in seeds:
            acc, prior = attack_hits.count("1") / len(attack_hits), prior_hits.count("1") / len(prior_hits)
            rows.append(RunRecord(key=f"{attack}{seed}", method="m", dataset="d", attack=attack, defense="none",
                                  phase="finetune", strength=0.0, seed=seed, utility=0.9, attack_accuracy=acc,
                                  prior_accuracy=prior, leakage=acc - prior, attack_hits=attack_hits,
                                  prior_hits=prior_hits, config=config, training_key=f"t{seed}").to_dict())
    return pd.DataFrame(rows)


def test_audit_verdicts_point_the_right_way_and_the_worst_case_is_the_largest_leakage_not_accuracy():
    n = 200
    leaks = ("1" * 120 + "0" * 80, "1" * 20 + "0" * 180)  # 0.6 against a prior of 0.1: leakage +0.5
    accurate = ("1" * 190 + "0" * 10, "1" * 180 + "0" * 20)  # 0.95 against 0.9: leakage +0.05, the top accuracy
    same = ("10" * (n // 2), "10" * (n // 2))  # the prior's guesses exactly: no leakage
    worse = ("1" * 20 + "0" * 180, "1" * 120 + "0" * 80)  # far below the prior: it failed to train
    summary = audit_summary(_audit_records({"mc": leaks, "dli": accurate, "gc": same, "norm": worse}), [],
                            margin=0.02, context={})
    verdicts = {v["attack"]: v for v in summary["verdicts"]}
    assert verdicts["mc"]["verdict"] == "yes" and verdicts["mc"]["leakage"] == pytest.approx(0.5)
    assert verdicts["dli"]["verdict"] == "yes" and verdicts["dli"]["leakage"] == pytest.approx(0.05)
    assert verdicts["gc"]["verdict"] == "no" and verdicts["gc"]["ci_high"] == pytest.approx(0.0)
    assert verdicts["norm"]["verdict"] == "attack failed"
    assert verdicts[WORST]["strongest"] == "mc" and verdicts[WORST]["verdict"] == "yes"
    assert verdicts["mc"]["n_targets"] == 3 * n


def test_the_per_target_interval_is_mcnemar_s_around_the_paired_mean():
    """One seed: leakage = mean(d), d = attack hit - prior hit; the interval +-1.96 sqrt(var(d) / n)."""
    summary = audit_summary(_audit_records({"mc": ("1" * 60 + "0" * 40, "1" * 50 + "0" * 50)}, seeds=(0,)), [],
                            margin=0.02, context={})
    (v,) = summary["verdicts"]
    d = np.array([0.0] * 50 + [1.0] * 10 + [0.0] * 40)
    half = 1.96 * math.sqrt(d.var(ddof=1) / d.size)
    assert v["leakage"] == pytest.approx(0.1)
    assert (v["ci_low"], v["ci_high"]) == (pytest.approx(0.1 - half), pytest.approx(0.1 + half))
    assert v["verdict"] == "yes"


def test_iso_on_conv_weights_takes_the_output_units_as_rows():
    """sigma = lambda * max_i ||W_i|| / sqrt(m): for a (out, in, kh, kw) weight, row i is output unit i (m = in*kh*kw),
    not a slice of the last axis."""
    weight = torch.zeros(4, 3, 2, 2)
    weight[2] = 1.0  # one output unit of norm sqrt(12); every last-axis slice has norm at most sqrt(2)
    assert iso_sigma(weight, strength=2.0).item() == pytest.approx(2.0 * math.sqrt(12) / math.sqrt(12))
    weight[2, 0, 0, 0] = 5.0  # norm sqrt(11 + 25) = 6
    assert iso_sigma(weight, strength=1.0).item() == pytest.approx(6 / math.sqrt(12))


def test_the_keys_of_one_dataset_name_in_two_folders_differ(tmp_path, monkeypatch):
    from vflpriv.methods.splitnn import SplitNN
    from vflpriv.runner import execution
    from vflpriv.runner.execution import pretrain_key

    monkeypatch.setattr(execution, "data_of", lambda config: "")  # the folders hold no files: the config's part only

    a, b = (RunConfig.model_validate({"dataset": {"name": "criteo", "root": str(tmp_path / d)}}) for d in "ab")
    assert a.key() != b.key() and a.training_key() != b.training_key()
    assert pretrain_key(a, SplitNN) != pretrain_key(b, SplitNN)
    same = RunConfig.model_validate({"dataset": {"name": "criteo", "root": str(tmp_path / "a")}})
    assert same.key() == a.key()


def test_a_defense_is_not_said_to_bring_down_an_attack_that_never_rose_above_the_prior():
    leaks = ("1" * 120 + "0" * 80, "1" * 20 + "0" * 180)  # +0.5 undefended
    worse = ("1" * 20 + "0" * 180, "1" * 120 + "0" * 80)  # -0.5 undefended: it failed
    same = ("10" * 100, "10" * 100)  # the prior exactly: nothing leaked
    undefended = _audit_records({"mc": leaks, "bli": worse, "gc": same})
    config = json.dumps({"partition": {"adversary": 1}})
    defended = pd.DataFrame([RunRecord(
        key=f"{attack}{seed}iso", method="m", dataset="d", attack=attack, defense="iso", phase="finetune",
        strength=1.0, strength_axis="lambda", strength_stronger="higher", strength_identity=0.0, num_classes=2,
        seed=seed, utility=0.8, attack_accuracy=0.1, prior_accuracy=0.1, leakage=0.0, config=config,
        training_key=f"d{seed}").to_dict() for attack in ("mc", "bli", "gc") for seed in (0, 1, 2)])
    summary = audit_summary(pd.concat([undefended, defended], ignore_index=True), [], margin=0.02, context={})
    said = {d["attack"]: d for d in summary["defenses"]}
    assert said["mc"]["falls_to_prior"]["strength"] == 1.0 and said["mc"]["falls_to_prior_text"].startswith("λ=1")
    assert said["bli"]["falls_to_prior"] is None
    assert said["bli"]["falls_to_prior_text"] == "n/a: below the prior without a defense (attack failed)"
    assert said["gc"]["falls_to_prior"] is None
    assert said["gc"]["falls_to_prior_text"] == "n/a: no leakage beyond the prior without a defense"


def test_the_audit_s_defense_text_names_only_scored_strengths_and_says_when_nothing_compares_it():
    """Review fin3 H1/H2: audit.md's Defenses table listed strengths whose runs all failed ("not within λ=1, λ=25"
    with λ=25 never scored) and credited a strength without saying no undefended run compares it."""
    config = json.dumps({"partition": {"adversary": 1}})

    def run(attack, strength, seed, *, accuracy, status="ok"):
        return RunRecord(key=f"{attack}{strength}{seed}", method="m", dataset="d", attack=attack, defense="iso",
                         phase="finetune", strength=strength, strength_axis="lambda", strength_stronger="higher",
                         strength_identity=0.0, num_classes=2, seed=seed, utility=0.8, attack_accuracy=accuracy,
                         prior_accuracy=0.1, leakage=accuracy - 0.1, config=config, training_key=f"d{seed}",
                         status=status).to_dict()

    rows = [run("mc", 1.0, seed, accuracy=0.6) for seed in (0, 1, 2)]
    rows += [run("mc", 25.0, seed, accuracy=float("nan"), status="failed") for seed in (0, 1, 2)]
    rows += [run("gc", 1.0, seed, accuracy=0.1) for seed in (0, 1, 2)]
    rows += [run("bli", 1.0, seed, accuracy=float("nan"), status="failed") for seed in (0, 1, 2)]
    summary = audit_summary(pd.DataFrame(rows), [], margin=0.02, context={})
    said = {d["attack"]: d["falls_to_prior_text"] for d in summary["defenses"]}
    assert said["mc"] == "not at the prior: λ=1 leaks beyond the prior"
    assert said["bli"] == "n/a: every defended run failed (see Failed runs)"  # review last2 R3: "not within " alone
    assert said["gc"].startswith("λ=1 ")
    assert said["gc"].endswith("; no undefended run of this configuration to compare)")
