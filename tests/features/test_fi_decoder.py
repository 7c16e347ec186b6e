"""fi-decoder: it inverts what can be inverted, and it (with the feature prior) never reads a victim feature outside
its known samples."""

from __future__ import annotations

import dataclasses

import torch

from feature_helpers import linear_view
from vflpriv.attacks.features.decoder_attack import DecoderOptions, FeatureDecoder
from vflpriv.common import feature_metrics as fm
from vflpriv.runner import execution, feature_prior
from vflpriv.runner.execution import run


def test_a_linear_invertible_bottom_is_inverted():
    view, truth = linear_view(n_aux=400)
    out = FeatureDecoder(DecoderOptions(epochs=100, lr=3e-3)).infer(view)
    assert fm.mse(out["test"].features, truth["test"]) < 1e-3
    assert fm.mse(out["train"].features, truth["train"]) < 1e-3


def _poisoned(scenario, fed, victim, known):
    """The victim's features of every target (training rows outside the known samples, every test row) replaced by
    noise, in the federation's party and in the dataset: what the messages already carried stays as it was."""
    g = torch.Generator().manual_seed(7)
    ds = scenario.dataset
    train = ds.x_train[victim].clone()
    targets = ~torch.isin(torch.arange(train.shape[0]), known)
    train[targets] = torch.rand(train[targets].shape, generator=g) * 5
    test = torch.rand(ds.x_test[victim].shape, generator=g) * 5
    fed.parties[victim] = dataclasses.replace(fed.parties[victim], x_train=train, x_test=test)
    xs = lambda old, new: tuple(new if k == victim else x for k, x in enumerate(old))  # noqa: E731
    dataset = dataclasses.replace(ds, x_train=xs(ds.x_train, train), x_test=xs(ds.x_test, test))
    return dataclasses.replace(scenario, dataset=dataset)


def test_the_attack_and_the_prior_never_read_a_target_s_victim_features(tiny, monkeypatch):
    seen = []
    real_infer, real_prior = FeatureDecoder.infer, feature_prior.compute

    def infer(self, view):
        out = real_infer(self, view)
        seen.append(("attack", {k: v.features.clone() for k, v in out.items()}))
        return out

    def prior(view, seed):
        out = real_prior(view, seed)
        seen.append(("prior", {kind: {k: v.clone() for k, v in g.items()} for kind, g in out.guesses.items()}))
        return out

    monkeypatch.setattr(FeatureDecoder, "infer", infer)
    monkeypatch.setattr(feature_prior, "compute", prior)
    monkeypatch.setattr(feature_prior, "_PRIORS", {})  # an earlier test's run of the same config cached its prior
    cfg = tiny(attack={"name": "fi-decoder", "options": {"epochs": 5}})
    (clean,) = run(cfg)
    monkeypatch.setattr(feature_prior, "_PRIORS", {})
    real = execution.run_feature_attack
    monkeypatch.setattr(execution, "run_feature_attack", lambda a, fed, scenario, *rest, **kw: real(
        a, fed, _poisoned(scenario, fed, a.adversary.victim, a.known), *rest, **kw))
    (poisoned,) = run(cfg)
    assert clean.status == poisoned.status == "ok"
    assert clean.feature_mse != poisoned.feature_mse  # the runner scores against the poisoned truth ...
    assert [w for w, _ in seen] == ["prior", "attack", "prior", "attack"]  # the prior first: the attack cannot reach it
    for (_, before), (_, after) in zip(seen[:2], seen[2:]):  # ... but nothing the adversary computed moved
        assert before.keys() == after.keys()
        for k in before:
            pairs = before[k].items() if isinstance(before[k], dict) else [(None, before[k])]
            for name, value in pairs:
                assert torch.equal(value, after[k][name] if name is not None else after[k]), (k, name)
