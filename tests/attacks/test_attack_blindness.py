"""No attack can read its targets' labels: after the training (so the federation and every message are unchanged),
every label the adversary may not hold is scrambled, in the dataset the runner scores with and in the active party's
own copy: the train targets' (the gradient attacks guess those) and the test samples'. Every attack's guesses stay
bit for bit the same, while the scores it reports move."""

import dataclasses

import pytest
import torch

import vflpriv.runner.execution as execution
from vflpriv.config.registry import ATTACKS
from vflpriv.config.schema import RunConfig
from vflpriv.runner.execution import run

CASES = {
    "mc": ("digits", {"epochs": 20}),
    "mc-mixmatch": ("digits", {"epochs": 2, "iterations": 5}),
    "gc": ("digits", {}),
    "norm": ("breast-cancer", {}),
    "direction": ("breast-cancer", {"proxy_epochs": 20}),
}


def _scrambled(scenario, fed):
    """The scenario with every label but the adversary's auxiliary ones permuted; the active party's labels too."""
    ds = scenario.dataset
    g = torch.Generator().manual_seed(0)
    y_train = ds.y_train.clone()
    others = torch.ones_like(y_train, dtype=torch.bool)
    others[scenario.aux] = False
    positions = others.nonzero().flatten()
    y_train[positions] = y_train[positions[torch.randperm(positions.numel(), generator=g)]]
    y_test = ds.y_test[torch.randperm(ds.y_test.numel(), generator=g)]
    known = fed.active.label_ids
    fed.active.labels[known] = y_train[known].to(fed.active.labels.device)
    return dataclasses.replace(scenario, dataset=dataclasses.replace(ds, y_train=y_train, y_test=y_test))


@pytest.mark.parametrize("name", sorted(CASES))
def test_guesses_do_not_depend_on_any_target_label(name, monkeypatch):
    dataset, options = CASES[name]
    cfg = RunConfig.model_validate({
        "dataset": {"name": dataset},
        "partition": {"labeled": 60, "aux": 20},
        "model": {"hidden": 32, "out_dim": 16},
        "finetune": {"epochs": 2, "batch_size": 32},
        "attack": {"name": name, "options": options, "prior": "none"},
    })
    cls = ATTACKS.get(name)
    real_infer, guesses = cls.infer, []

    def spy(self, view):
        out = real_infer(self, view)
        guesses.append({k: (v.predictions.clone(), v.scores) for k, v in out.items()})
        return out

    monkeypatch.setattr(cls, "infer", spy)
    (first,) = run(cfg)
    real_attack = execution.run_attack
    monkeypatch.setattr(execution, "run_attack", lambda a, fed, scenario, *rest, **kw: real_attack(
        a, fed, _scrambled(scenario, fed), *rest, **kw))
    (second,) = run(cfg)
    assert first.status == second.status == "ok"
    assert set(guesses[0]) == set(guesses[1]) and "train" in guesses[0]
    for target, (pred, scores) in guesses[0].items():
        assert torch.equal(pred, guesses[1][target][0])
        assert scores is None or torch.equal(scores, guesses[1][target][1])
    assert first.utility == second.utility  # the same training: only what the attack could have read changed
    before, after = (first.attack_accuracy, first.attack_accuracy_train), (second.attack_accuracy,
                                                                            second.attack_accuracy_train)
    assert before != after
