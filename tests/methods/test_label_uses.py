"""dp-gaussian's claim and the methods: every registered method (and the examples' plugins) x dp-gaussian is refused,
covered by the argument, or recorded without an epsilon. "Covered" is checked on behaviour, not on the declaration:
with the mechanism's signal discarded (what it releases is its noise alone), changing the active party's labels must
change nothing a passive party receives and nothing any party holds, so the mechanism is the labels' only way out."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
import torch
from pretrain_helpers import TINY_MODEL, tiny_options

from vflpriv.common.errors import IncompatibleError
from vflpriv.config.registry import DEFENSES, METHODS
from vflpriv.config.schema import RunConfig
from vflpriv.engine import ACTIVE
from vflpriv.runner.execution import build_federation
from vflpriv.runner.planning import plan

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
#: The examples' plugins by class path (not installed in the test environment).
PLUGINS = {"vflpriv_aggvfl:AggVFL": "aggvfl", "vflpriv_fedbcd:FedBCD": "fedbcd",
           "vflpriv_gradient_bypass:GradientBypass": "gradient-bypass", "vflpriv_leaky_split:LeakySplit": "leaky-split"}


@pytest.fixture
def plugins(monkeypatch):
    for folder in PLUGINS.values():
        monkeypatch.syspath_prepend(str(EXAMPLES / folder))
    yield
    for name in [m for m in sys.modules if m.startswith("vflpriv_")]:
        sys.modules.pop(name)


def _config(method: str, **options) -> RunConfig:
    return RunConfig.model_validate({
        "partition": {"labeled": 60, "aux": 20}, "model": TINY_MODEL, "finetune": {"epochs": 1, "batch_size": 32},
        "method": {"name": method, "options": {**tiny_options(method), **options}},
        "defenses": [{"name": "dp-gaussian", "strength": 1.0, "sweep": True}],
        "attack": {"name": "mc", "prior": "none"}})


def _train(cfg: RunConfig, *, shift: bool):
    """Train ``cfg`` with dp-gaussian's signal discarded (its release is noise alone), the active party's labels
    shifted by one class where ``shift``; what the passive parties received, every party's trained state, the defense."""
    p = plan(cfg)
    fed = build_federation(p)
    if shift:
        labels = fed.active.labels.clone()
        known = labels >= 0
        labels[known] = (labels[known] + 1) % fed.num_classes
        fed.parties[ACTIVE] = dataclasses.replace(fed.active, labels=labels)
    received = []
    fed.channel.observers.append(lambda m, payload: received.append(payload) if m.receiver != ACTIVE else None)
    pretrained = p.method.pretrain(fed) if p.method.pretrains else None
    trained = p.method.finetune(fed, pretrained)
    held = [t for m in (*trained.bottoms, trained.top) for t in m.state_dict().values()]
    return received, held, p.defenses[0]


def _same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a.shape == b.shape and bool(torch.equal(a, b))


@pytest.fixture
def signal_off(monkeypatch):
    """dp-gaussian's backward on zeroed losses: the clipped signal is 0, the noise (and the use count) as always."""
    cls = DEFENSES.get("dp-gaussian")
    original = cls.backward
    monkeypatch.setattr(cls, "backward", lambda self, losses, *rest, **kw: original(self, losses * 0.0, *rest, **kw))


def _check(cfg: RunConfig) -> None:
    try:
        plan(cfg)
    except IncompatibleError:
        return  # refused: no epsilon
    received, held, defense = _train(cfg, shift=False)
    if defense.uncovered:  # not covered: the run records no epsilon, whatever the mechanism spent
        assert defense.privacy_spent() is None
        return
    assert defense.privacy_spent() is not None
    received_shifted, held_shifted, _ = _train(cfg, shift=True)
    assert len(received) == len(received_shifted)
    assert all(_same(a, b) for a, b in zip(received, received_shifted)), "a passive party receives the labels"
    assert all(_same(a, b) for a, b in zip(held, held_shifted)), "a party's model holds the labels"


@pytest.mark.parametrize("method", METHODS.names())
def test_every_method_is_refused_covered_by_dp_gaussian_or_recorded_without_an_epsilon(method, signal_off):
    _check(_config(method))


@pytest.mark.parametrize("method", ["oneshot", "fewshot"])
@pytest.mark.parametrize("server", ["label-holder", "feature-less"])
def test_oneshot_and_fewshot_end_to_end_are_not_covered(method, server, signal_off):
    """Finding 1: before the private loop they send a gradient of the clean labels, train the server's top on them
    (and fewshot sends probabilities from clean-label classifiers)."""
    cfg = _config(method, finetune_end_to_end=True, server=server)
    _check(cfg)
    assert plan(cfg).defenses[0].uncovered


@pytest.mark.parametrize("path", sorted(PLUGINS))
def test_the_examples_plugins_are_refused_covered_or_recorded_without_an_epsilon(path, plugins, signal_off):
    _check(_config(path))


@pytest.fixture
def label_free(monkeypatch):
    """label-dp's randomised response replaced by labels that depend on nothing but their count (0, 1, .., C-1, 0, ..):
    what it releases is then label-free."""
    cls = DEFENSES.get("label-dp")
    monkeypatch.setattr(cls, "relabel", lambda self, labels, *, num_classes: torch.arange(
        labels.numel(), device=labels.device) % num_classes)


def _train_relabelled(cfg: RunConfig, *, shift: bool):
    """Train ``cfg`` with the dataset's clean labels shifted by one class where ``shift`` (before the label defense
    binds); what the passive parties received and every party's trained state."""
    p = plan(cfg)
    if shift:
        ds = p.scenario.dataset
        shifted = dataclasses.replace(ds, y_train=(ds.y_train + 1) % ds.num_classes)
        p.scenario = dataclasses.replace(p.scenario, dataset=shifted)
    fed = build_federation(p)
    received = []
    fed.channel.observers.append(lambda m, payload: received.append(payload) if m.receiver != ACTIVE else None)
    pretrained = p.method.pretrain(fed) if p.method.pretrains else None
    trained = p.method.finetune(fed, pretrained)
    return received, [t for m in (*trained.bottoms, trained.top) for t in m.state_dict().values()]


@pytest.mark.parametrize("method", METHODS.names())
def test_every_method_reads_only_the_labels_a_label_defense_left(method, label_free):
    """A label defense replaces the labels once, at binding, before any method code runs: no method reads the clean
    ones around it (from the dataset, before binding, in pretraining), so label-dp's epsilon covers every method."""
    cfg = _config(method).model_copy(update={"defenses": []})
    cfg = RunConfig.model_validate({**cfg.model_dump(), "defenses": [{"name": "label-dp", "strength": 1.0}]})
    received, held = _train_relabelled(cfg, shift=False)
    received_shifted, held_shifted = _train_relabelled(cfg, shift=True)
    assert len(received) == len(received_shifted)
    assert all(_same(a, b) for a, b in zip(received, received_shifted))
    assert all(_same(a, b) for a, b in zip(held, held_shifted))
