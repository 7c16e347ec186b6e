"""A feature-attack plugin's reply is checked against :meth:`FeatureAttack.infer`'s contract: a reconstruction of every
target set it was given and of no other, one row per target of the victim's shape, finite. A reply that breaks it
fails that attack's run with the plugin named; the other attacks on the same training keep their scores, and nothing
a plugin does to its view reaches the feature prior."""

from __future__ import annotations

import math

import pytest
import torch

from vflpriv.attacks.features.base import Reconstruction
from vflpriv.attacks.features.decoder_attack import FeatureDecoder
from vflpriv.config.registry import ATTACKS
from vflpriv.runner import feature_prior
from vflpriv.runner.execution import run


def _zeros(view, name, extra=0):
    return torch.zeros(view.received[name].shape[0] + extra, *view.victim_spec.shape)


REPLIES = {
    "wrong-shape": (lambda v: {n: Reconstruction(torch.zeros(v.received[n].shape[0], 3)) for n in v.targets},
                    "the victim's features have shape"),
    "extra-row": (lambda v: {n: Reconstruction(_zeros(v, n, 1)) for n in v.targets}, "the victim's features have shape"),
    "untold-set": (lambda v: {**{n: Reconstruction(_zeros(v, n)) for n in v.targets},
                              "aux": Reconstruction(_zeros(v, "aux"))}, "returned reconstructions of aux, test, train"),
    "missing-set": (lambda v: {"test": Reconstruction(_zeros(v, "test"))}, "returned reconstructions of test; it was "
                                                                           "given train, test"),
    "not-a-mapping": (lambda v: None, "returned NoneType, not a mapping"),
    "bare-tensor": (lambda v: {n: _zeros(v, n) for n in v.targets}, "returned Tensor for its train targets"),
    "nan": (lambda v: {n: Reconstruction(torch.full(_zeros(v, n).shape, math.nan)) for n in v.targets},
            "became non-finite"),
}


def _plugin(reply):
    class Hostile(FeatureDecoder):
        def infer(self, view):
            view.aux_victim.fill_(1.0)  # it reads (and spoils) its view; the prior was computed before
            view.received["aux"].fill_(0.0)
            for own in view.own.values():  # its own features too (the test split was the dataset's own tensor)
                own.add_(100.0)
            return reply(view)

    return Hostile


@pytest.mark.parametrize("case", sorted(REPLIES))
def test_a_plugin_reply_that_breaks_the_contract_fails_its_run_naming_it_and_keeps_the_other_attack_s(case, tiny):
    reply, needle = REPLIES[case]
    ATTACKS.register("hostile", _plugin(reply))
    honest = {"name": "fi-decoder", "options": {"epochs": 5}}
    (before,) = run(tiny(attack=honest)) if case == "wrong-shape" else (None,)
    ok, bad = run([tiny(attack=honest), tiny(attack={"name": "hostile", "options": {"epochs": 5}})])
    assert ok.status == "ok" and math.isfinite(ok.feature_mse)
    assert bad.status == "failed" and needle in bad.error, bad.error
    if case != "nan":
        assert "attack 'hostile' (" in bad.error and "Hostile" in bad.error  # the plugin named, with its class
    if case == "wrong-shape":  # the honest attack's numbers are those of a run without the plugin, before or after it
        (alone,) = run(tiny(attack=honest))  # (the plugin spoiled its own features: the dataset's test split was them)
        for other in (before, alone):
            assert (ok.feature_mse, ok.prior_mse, ok.utility) == (other.feature_mse, other.prior_mse, other.utility)


def test_a_plugin_that_spoils_its_view_moves_no_prior(tiny, monkeypatch):
    monkeypatch.setattr(feature_prior, "_PRIORS", {})  # each run computes its prior (no process-wide reuse)
    ATTACKS.register("hostile", _plugin(lambda v: {n: Reconstruction(_zeros(v, n)) for n in v.targets}))
    (spoiled,) = run(tiny(attack={"name": "hostile", "options": {"epochs": 5}}))
    feature_prior._PRIORS.clear()
    (alone,) = run(tiny(attack={"name": "fi-decoder", "options": {"epochs": 5}}))
    assert spoiled.status == "ok"
    assert (spoiled.prior_mse, spoiled.prior_mse_mean, spoiled.prior_kind) == (
        alone.prior_mse, alone.prior_mse_mean, alone.prior_kind)


def test_a_plugin_that_spoils_its_own_features_leaves_the_dataset_and_later_runs_alone(tiny):
    """The view's own test split was the loaded dataset's tensor (kept in memory for later runs): a plugin adding to it
    in place moved every later run's utility and prior (0.189 -> 0.100). The view gets a copy."""
    from vflpriv.data.load import load_dataset

    config = tiny()
    dataset = load_dataset(config.dataset, parties=config.partition.parties)
    kept = [x.clone() for x in dataset.x_test]
    ATTACKS.register("hostile", _plugin(lambda v: {n: Reconstruction(_zeros(v, n)) for n in v.targets}))
    (spoiled,) = run(tiny(attack={"name": "hostile", "options": {"epochs": 5}}))
    assert spoiled.status == "ok"
    assert all(torch.equal(x, k) for x, k in zip(dataset.x_test, kept))


TRIAL_REPLIES = {
    "wrong-shape": (lambda v: {n: Reconstruction(torch.zeros(v.received[n].shape[0], 3)) for n in v.targets},
                    "the victim's features have shape"),
    "not-a-reconstruction": (lambda v: {n: _zeros(v, n) for n in v.targets}, "not a Reconstruction of a tensor"),
}


@pytest.mark.parametrize("case", sorted(TRIAL_REPLIES))
def test_a_tuned_plugin_s_trial_reply_is_checked_as_its_last_reply_is(case, tiny):
    """A trial (on the fit part of the auxiliary set, scored on the holdout) that breaks the contract fails the run
    naming the plugin; the refit's reply is honest, so only the per-trial check can catch it."""
    reply, needle = TRIAL_REPLIES[case]

    class HostileTrials(FeatureDecoder):
        def infer(self, view):
            return reply(view) if "holdout" in view.received else super().infer(view)

    ATTACKS.register("hostile-trials", HostileTrials)
    (bad,) = run(tiny(attack={"name": "hostile-trials", "options": {"epochs": 2}, "tune": True,
                              "search_space": {"lr": [1e-3, 3e-3]}}))
    assert bad.status == "failed" and needle in bad.error and "attack 'hostile-trials' (" in bad.error, bad.error
    assert "HostileTrials" in bad.error
