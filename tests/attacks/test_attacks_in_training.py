"""Attacks that observe or act during training, and the protocols they assume, through the real runner:
DLI exact on aggVFL, BLI exact on one aggVFL batch, an acting attack's own training, the recorder keeping only
what was asked (the bottom as it was before the update), FedBCD in the shared loop against the example plugin."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from torch import nn

from vflpriv.config.registry import METHODS
from vflpriv.config.schema import RunConfig
from vflpriv.engine import PassiveStep
from vflpriv.engine.adversary import AdversaryHooks, Observation
from vflpriv.runner.execution import execute, run, train
from vflpriv.runner.planning import plan

ROOT = Path(__file__).resolve().parents[2]
TINY = {"model": {"hidden": 64, "out_dim": 32}, "finetune": {"epochs": 3, "batch_size": 32},
        "attack": {"prior": "aux", "prior_epochs": 30}}


def _config(**changes) -> RunConfig:
    data = {k: dict(v) for k, v in TINY.items()}
    for key, value in changes.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    return RunConfig.model_validate(data)


@pytest.mark.parametrize("dataset", [{"name": "digits"}, {"name": "breast-cancer"}])
def test_dli_recovers_every_label_under_a_sum_of_logits_top(dataset):
    (record,) = run(_config(dataset=dataset, attack={"name": "dli"}, finetune={"top": "sum"},
                            partition={"labeled": 80, "aux": 20} if dataset["name"] == "breast-cancer" else {}))
    assert record.status == "ok", record.error
    assert record.attack_accuracy == 1.0 and record.n_targets > 0


def test_bli_recovers_its_batch_under_a_sum_top_and_is_scored_on_that_batch_only():
    (record,) = run(_config(attack={"name": "bli", "options": {"iterations": 150}}, finetune={"top": "sum"}))
    assert record.status == "ok", record.error
    assert record.n_targets == 32 and record.attack_accuracy == 1.0  # the first batch of epoch 0, 32 samples
    assert len(record.prior_hits) == len(record.attack_hits) == 32  # the prior, on the same 32 samples


def test_an_acting_attack_trains_its_own_federation_and_says_so():
    passive, active = (_config(attack={"name": name, "options": {"epochs": 2, "iterations": 20}})
                       for name in ("mc-mixmatch", "mc-active"))
    assert passive.training_key() != active.training_key()
    assert _config(attack={"name": "mc"}).training_key() == passive.training_key()  # passive attacks share
    a, b = run(passive)[0], run(active)[0]
    assert not a.training_under_attack and b.training_under_attack
    assert a.utility != b.utility  # the malicious optimiser changed the federation it attacks


def test_the_malicious_optimiser_replaces_only_the_adversarys_own():
    p = plan(_config(attack={"name": "mc-active", "options": {"epochs": 1, "iterations": 5}},
                     partition={"parties": 4, "adversary": 2}, dataset={"name": "digits"}))
    from vflpriv.attacks.labels.malicious import MaliciousAdam
    from vflpriv.models.optim import FusedAdam
    from vflpriv.runner.execution import build_federation

    fed = build_federation(p)
    chosen = {k: fed.hooks.passive_optimizer(k, [nn.Parameter(torch.zeros(1))], fed.finetune,
                                             lambda: FusedAdam([nn.Parameter(torch.zeros(1))], lr=0.1))
              for k in (1, 2, 3)}
    assert isinstance(chosen[2], MaliciousAdam)
    assert isinstance(chosen[1], FusedAdam) and isinstance(chosen[3], FusedAdam)


def _step(party: int, epoch: int, step: int, bottom: nn.Module) -> PassiveStep:
    x = torch.randn(4, 3)
    return PassiveStep(party, epoch, step, torch.arange(4), x, bottom, bottom(x), torch.randn(4, 2))


def test_the_recorder_keeps_only_what_was_asked_and_the_bottom_as_it_was():
    bottom = nn.Linear(3, 2)
    nn.init.zeros_(bottom.weight)
    first = Observation(epochs="first", steps=1, bottom=True)
    last = Observation(epochs="last", steps=None)
    hooks = AdversaryHooks(1, [first, last])
    for epoch in range(3):
        for step in range(4):
            hooks.passive_step(_step(1, epoch, step, bottom))
            hooks.passive_step(_step(2, epoch, step, bottom))  # another party: never recorded
            with torch.no_grad():
                bottom.weight.add_(1.0)  # the update after the step
    kept_first = hooks.steps_for(first)
    assert [(s.epoch, s.step) for s in kept_first] == [(0, 0)]
    assert torch.equal(kept_first[0].bottom.weight, torch.zeros(2, 3))  # as it was before any of the 12 updates
    assert torch.equal(bottom.weight, torch.full((2, 3), 12.0))
    assert [(s.epoch, s.step) for s in hooks.steps_for(last)] == [(2, 0), (2, 1), (2, 2), (2, 3)]
    assert all(s.bottom is None for s in hooks.steps_for(last) if s.step > 0)
    assert len(hooks.recorded) == 5  # epoch 0 step 0, and the last epoch: older epochs were dropped as they ended


def test_a_training_without_observing_or_acting_attacks_installs_no_adversary_hooks():
    from vflpriv.engine import TrainingHooks

    result = train(plan(_config(attack={"name": "mc"})))
    assert type(result.fed.hooks.adversary) is TrainingHooks


def _fedbcd_plugin():
    spec = importlib.util.spec_from_file_location("vflpriv_fedbcd", ROOT / "examples/fedbcd/vflpriv_fedbcd/__init__.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FedBCD


def test_fedbcd_in_the_shared_loop_is_the_example_plugin_bit_for_bit():
    """Two implementations of FedBCD-p, the shared loop's ``local_updates`` and the custom-loop example, agree."""
    METHODS.register("example-fedbcd", _fedbcd_plugin())
    shared, = run(_config(attack={"name": "gc", "prior": "none"}, finetune={"local_updates": 4}))
    plugin, = run(_config(attack={"name": "gc", "prior": "none"}, method={"name": "example-fedbcd",
                                                                         "options": {"local_updates": 4}}))
    assert shared.utility == plugin.utility and shared.attack_accuracy == plugin.attack_accuracy
    assert shared.comm_messages_finetune == plugin.comm_messages_finetune


def test_local_updates_send_the_messages_of_one_update_and_train_more():
    one, five = (run(_config(attack={"name": "gc", "prior": "none"}, finetune={"local_updates": q}))[0] for q in (1, 5))
    assert one.comm_messages_finetune == five.comm_messages_finetune == 2 * 3 * 7  # 3 epochs x 7 batches of 200 labels
    assert one.comm_mb_finetune == five.comm_mb_finetune > 0 and one.comm_messages_inference == 1
    assert five.utility > one.utility


@pytest.mark.parametrize("top", ["mlp", "sum"])
def test_every_top_trains_and_the_sum_top_gives_each_party_class_logits(top):
    cfg = _config(attack={"name": "mc"}, finetune={"top": top})
    result = train(plan(cfg))
    width = result.trained.bottoms[1](result.fed.parties[1].x_test[:2]).shape[1]
    assert width == (10 if top == "sum" else 32)
    assert result.utility > 0.3
    (record,) = execute(plan(cfg))
    assert record.status == "ok", record.error


def test_a_custom_loop_that_calls_the_hook_points_serves_observing_and_acting_attacks():
    METHODS.register("example-fedbcd", _fedbcd_plugin())
    method = {"name": "example-fedbcd", "options": {"local_updates": 2}}
    bli, = run(_config(method=method, attack={"name": "bli", "options": {"iterations": 20}}))
    active, = run(_config(method=method, attack={"name": "mc-active", "options": {"epochs": 1, "iterations": 10}}))
    assert bli.status == "ok" and bli.n_targets == 32, bli.error
    assert active.status == "ok" and active.training_under_attack, active.error
