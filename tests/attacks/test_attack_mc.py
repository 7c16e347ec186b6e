"""Model completion: label leakage comes from the federation, and the options behave as documented."""

import dataclasses

import torch
from attack_helpers import register_xor, xor_config

from vflpriv.config.schema import RunConfig
from vflpriv.runner.execution import execute
from vflpriv.runner.planning import plan


def _shuffled_training_labels(p):
    """The active party trains with its labels permuted among the labeled samples (aux and test untouched)."""
    ds, lab = p.scenario.dataset, p.scenario.labeled
    y = ds.y_train.clone()
    y[lab] = y[lab][torch.randperm(lab.numel(), generator=torch.Generator().manual_seed(1))]
    p.scenario = dataclasses.replace(p.scenario, dataset=dataclasses.replace(ds, y_train=y))
    return p


def test_mc_scores_chance_when_the_federation_learned_shuffled_labels():
    cfg = RunConfig.model_validate(xor_config(register_xor()))
    (real,) = execute(plan(cfg))
    (shuffled,) = execute(_shuffled_training_labels(plan(cfg)))
    assert real.attack_accuracy > 0.7  # positive control: the trained bottom leaks
    assert abs(shuffled.attack_accuracy - 0.5) < 0.1  # trained on noise: nothing to complete


def test_fu_style_head_and_optimistic_epoch_selection():
    opts = {"head": "mlp", "train_bottom": True, "epochs": 30, "report_best_epoch_on_targets": True}
    data = xor_config(register_xor(), attack={"options": opts, "prior": "none"})
    data["finetune"] = {"epochs": 5, "batch_size": 32}
    (rec,) = execute(plan(RunConfig.model_validate(data)))
    assert rec.attack_accuracy_optimistic >= rec.attack_accuracy
    assert 0.0 <= rec.attack_auc <= 1.0
