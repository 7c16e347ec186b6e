"""``finetune.validation``: labeled samples the active party holds out of finetuning to choose an lr or epoch on,
never the test set (issue 39), and the reproduce selection made on them."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import torch

from vflpriv.common.errors import ConfigError, IncompatibleError
from vflpriv.config.schema import PartitionConfig
from vflpriv.data.embedded import load_digits
from vflpriv.data.scenario import build_scenario
from vflpriv.engine import make_parties
from vflpriv.runner.execution import run
from vflpriv.workflows.reproductions.selection import Selection, choose


@pytest.fixture(scope="module")
def digits():
    return load_digits(parties=2)


def test_the_held_out_ids_are_labeled_aligned_none_auxiliary_nor_canary_and_nothing_else_moves(digits):
    part = PartitionConfig(labeled=200, aux=40, aux_source="labeled", canaries=10)
    plain = build_scenario(digits, part, seed=4)
    held = build_scenario(digits, part, seed=4, validation=0.25)
    for name in ("aligned", "labeled", "aux", "canaries", "canary_labels"):
        assert torch.equal(getattr(plain, name), getattr(held, name)), name  # drawn last: every other set as it was
    val = held.validation
    assert val.numel() == 50 and val.unique().numel() == 50 and torch.isin(val, held.labeled).all()
    assert not torch.isin(val, torch.cat([held.aux, held.canaries])).any()
    assert not torch.isin(held.active_label_ids(), val).any()
    assert held.active_label_ids().numel() == 150 and plain.validation.numel() == 0
    assert not torch.equal(val, build_scenario(digits, part, seed=5, validation=0.25).validation)


def test_the_active_party_trains_without_the_held_out_labels_and_keeps_them_true(digits):
    sc = build_scenario(digits, PartitionConfig(labeled=100, aux=40), seed=0, validation=0.2)
    active = make_parties(sc, torch.device("cpu"))[0]
    assert (active.labels[sc.validation] == -1).all()  # no label defense or loop reads them
    assert torch.equal(active.validation_labels, digits.y_train[sc.validation])
    assert torch.equal(active.validation_ids, sc.validation)


@pytest.mark.parametrize("share, message", [(0.001, "is no sample"), (0.5, "only .* can be held out")])
def test_a_split_of_no_sample_or_of_the_canaries_is_refused(digits, share, message):
    part = PartitionConfig(labeled=30, aux=0, canaries=20)
    with pytest.raises(ConfigError, match=message):
        build_scenario(digits, part, seed=0, validation=share)


def test_the_run_records_the_validation_utility_of_its_final_model_and_the_best_test_epoch(tiny):
    (r,) = run(tiny(finetune={"epochs": 3, "batch_size": 32, "validation": 0.2, "curve": True}))
    points = json.loads(r.utility_curve)
    assert r.status == "ok" and all(len(p) == 4 for p in points)
    assert r.utility_val == points[-1][3]  # the final model is the last epoch's: the same rows, the same number
    assert 0 <= r.utility_val <= 1 and r.utility_val * 20 == pytest.approx(round(r.utility_val * 20))  # 20 rows
    assert r.utility_optimistic == max(p[2] for p in points) >= r.utility
    (plain,) = run(tiny(finetune={"epochs": 3, "batch_size": 32}))
    assert math.isnan(plain.utility_val) and math.isnan(plain.utility_optimistic)


def test_label_dp_leaves_the_validation_labels_true(tiny):
    """The held-out labels never leave the active party, so no label defense randomises them: a validation
    utility under RR at a tiny epsilon is still scored against the true labels."""
    from vflpriv.runner.execution import build_federation
    from vflpriv.runner.planning import plan

    p = plan(tiny(finetune={"validation": 0.2}, defenses=[{"name": "label-dp", "strength": 0.01}]))
    fed = build_federation(p)
    assert torch.equal(fed.active.validation_labels, p.scenario.dataset.y_train[p.scenario.validation])
    trained = fed.active.labels[p.scenario.active_label_ids()]
    assert not torch.equal(trained, p.scenario.dataset.y_train[p.scenario.active_label_ids()])  # RR acted there


def test_a_method_predicting_on_the_test_rows_only_refuses_the_split(tiny, monkeypatch):
    from vflpriv.config.registry import METHODS

    method = METHODS.get("splitnn")
    monkeypatch.setattr(method, "predict", lambda self, fed, trained: None)
    with pytest.raises(IncompatibleError, match="finetune.validation=0.2: method 'splitnn' predicts on the test rows"):
        run(tiny(finetune={"validation": 0.2}))


def _runs(rows):
    return pd.DataFrame([{"method": "m", "by": 200, "dataset": "d", "attack": "mc", "defense": "none", "phase": "f",
                          "strength": 0.0, "seed": seed, "utility": u, "utility_val": v, "utility_optimistic": o,
                          "attack_accuracy": a, "config": json.dumps({"finetune": {"lr": lr}})}
                         for seed, lr, u, v, o, a in rows])


def test_the_selection_keeps_per_seed_the_best_validation_value_and_reports_the_test_optimum_apart():
    sel = Selection("finetune.lr", [0.005, 0.01, 0.03], 0.2)
    runs = _runs([(0, 0.005, 0.50, 0.60, 0.52, 0.30), (0, 0.01, 0.70, 0.55, 0.72, 0.40), (0, 0.03, 0.60, 0.60, 0.65, 0.20),
                  (1, 0.005, 0.40, 0.30, float("nan"), 0.10), (1, 0.01, 0.45, 0.35, float("nan"), 0.50),
                  (1, 0.03, 0.42, 0.50, float("nan"), 0.20)])
    chosen = choose(runs, sel, pd.Series("m", index=runs.index)).set_index("seed")
    assert chosen.loc[0, "selected"] == 0.005  # a tie on validation goes to the first value, never to the test's best
    assert chosen.loc[0, "utility"] == 0.50 and chosen.loc[1, "utility"] == 0.42
    assert chosen.loc[0, "utility_optimistic"] == 0.72 and chosen.loc[1, "utility_optimistic"] == 0.45
    assert chosen.loc[0, "attack_accuracy_selection"] == 0.40 and chosen.loc[1, "attack_accuracy_selection"] == 0.50
    assert chosen.loc[1, "attack_accuracy"] == 0.20  # the chosen training's own attack stays as measured


def test_runs_without_a_validation_utility_cannot_be_selected_on():
    runs = _runs([(0, 0.01, 0.5, float("nan"), 0.5, 0.1), (0, 0.03, 0.6, 0.5, 0.6, 0.1)])
    with pytest.raises(ConfigError, match="1 runs have no validation utility"):
        choose(runs, Selection("finetune.lr", [0.01, 0.03], 0.2), pd.Series("m", index=runs.index))


def test_an_analogue_with_a_selection_runs_each_part_once_per_value_with_the_split():
    from vflpriv.workflows import reproductions

    analogue = reproductions.load("fedhssl-tables7-12")
    grids = analogue.grids(quick=True)
    values = analogue.select.values
    assert len(grids) == len(analogue.parts) * len(values)
    assert [g["finetune"]["lr"] for g in grids[: len(values)]] == values
    assert all(g["finetune"]["validation"] == analogue.select.validation and g["finetune"]["curve"] for g in grids)
    with pytest.raises(ConfigError, match="select.values must list at least 2"):
        Selection.parse({"setting": "finetune.lr", "values": [0.01], "validation": 0.2})


def test_the_optimistic_utility_is_the_best_epoch_on_the_test_set_or_the_final_model():
    from vflpriv.runner.execution import TrainedFederation

    def best(utility, curve):
        return TrainedFederation(None, None, None, utility, "accuracy", 0.0, curve=curve).utility_optimistic

    assert best(0.5, [[0, 1.0, 0.7], [1, 2.0, 0.6], [2, 3.0, 0.5]]) == 0.7  # an early epoch was best on test
    assert best(0.8, [[0, 1.0, 0.7], [1, 2.0, 0.6]]) == 0.8  # re-estimated statistics after the last epoch
    assert math.isnan(best(0.5, []))


@pytest.mark.parametrize("labeled, canaries, share, held", [(4, 0, 0.5, 2), (20, 9, 0.5, 10), (100, 0, 0.01, 1)])
def test_a_split_at_each_limit_is_drawn(labeled, canaries, share, held):
    """Exactly 2 labeled samples left to train on, every sample that may be held out held out (with canaries, one
    sample left to score the attacks on: 10 canaries and 10 held out of 20 are refused,
    ``tests/cli/test_settings_honoured.py``), and one sample."""
    data = load_digits(parties=2) if labeled >= 10 else _binary()
    sc = build_scenario(data, PartitionConfig(labeled=labeled, aux=0, canaries=canaries), seed=0, validation=share)
    assert sc.validation.numel() == held


def test_a_split_leaving_one_sample_to_train_on_is_refused_naming_what_may_be_held_out():
    with pytest.raises(ConfigError, match="holds out 2 of the 3 labeled samples, but only 1 can be held out"):
        build_scenario(_binary(), PartitionConfig(labeled=3, aux=0), seed=0, validation=0.5)


def _binary():
    from vflpriv.data.embedded import load_breast_cancer

    return load_breast_cancer(parties=2)


@pytest.mark.parametrize("method", ["local-a", "centralized-lr", "oneshot"])
def test_methods_with_their_own_prediction_score_the_validation_rows(tiny, method):
    """Methods that do not predict through the shared split inference score exactly the held-out rows too."""
    from vflpriv.runner.execution import build_federation, validation_utility
    from vflpriv.runner.planning import plan

    config = tiny(method={"name": method}, finetune={"epochs": 2, "batch_size": 32, "validation": 0.2})
    p = plan(config)
    fed = build_federation(p)
    val = fed.active.validation_ids
    assert val.numel() > 0 and not torch.isin(fed.active.label_ids, val).any()
    trained = p.method.finetune(fed, p.method.pretrain(fed) if p.method.pretrains else None)
    logits = p.method.predict(fed, trained, ids=val)
    assert logits.shape == (val.numel(), 10)
    by_hand = (logits.argmax(1) == fed.active.validation_labels).double().mean().item()  # accuracy on every held row
    assert validation_utility(p.method, "accuracy", fed, trained) == pytest.approx(by_hand)
    (record,) = run(config)
    assert record.utility_val * val.numel() == pytest.approx(round(record.utility_val * val.numel()))


def test_a_utility_of_logits_for_other_rows_than_the_labels_is_refused():
    from vflpriv.common import metrics

    labels = torch.tensor([0, 1, 1, 0])
    assert metrics.utility("accuracy", torch.eye(2)[labels], labels) == 1.0
    with pytest.raises(ValueError, match="1 rows of logits for 4 labels"):
        metrics.utility("accuracy", torch.eye(2)[labels[:1]], labels)
