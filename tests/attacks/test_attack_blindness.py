"""No attack can read its targets' labels: scrambling the labels the runner scores with (the test
labels) leaves every attack's guesses unchanged, while the scores it reports do move."""

import dataclasses

import pytest
import torch

import vflpriv.data.load as load
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


@pytest.mark.parametrize("name", sorted(CASES))
def test_guesses_do_not_depend_on_target_labels(name, monkeypatch):
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
    original = load.load_dataset(cfg.dataset, parties=2)
    perm = torch.randperm(original.y_test.numel(), generator=torch.Generator().manual_seed(0))
    scrambled = dataclasses.replace(original, y_test=original.y_test[perm])
    monkeypatch.setattr("vflpriv.runner.planning.load_dataset", lambda *_a, **_k: scrambled)
    (second,) = run(cfg)
    for target, (pred, scores) in guesses[0].items():
        assert torch.equal(pred, guesses[1][target][0])
        assert scores is None or torch.equal(scores, guesses[1][target][1])
    assert first.utility != second.utility
