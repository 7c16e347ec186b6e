"""An attack plugin that changes in place what it is handed (an in-place normalisation written carelessly) moves no
other number: the loaded dataset and the training's other attacks read their own values, and a change to the
messages the training's attacks share, or to the view its own prior reads, fails its run naming it."""

from __future__ import annotations

import torch

from vflpriv.attacks.features.decoder_attack import FeatureDecoder
from vflpriv.attacks.labels.model_completion import ModelCompletion
from vflpriv.config.registry import ATTACKS
from vflpriv.runner.execution import run


class ZeroesItsTestFeatures(ModelCompletion):
    """mc after zeroing, in place, the test features it was handed (its own, the passive party's)."""

    def infer(self, view):
        view.targets["test"].mul_(0.0)
        return super().infer(view)


class ZeroesItsAuxFeatures(ModelCompletion):
    """mc after zeroing, in place, its auxiliary samples' features (which its prior reads after it)."""

    def infer(self, view):
        view.aux_x.mul_(0.0)
        return super().infer(view)


class ZeroesTheMessages(FeatureDecoder):
    """fi-decoder after zeroing, in place, every message its inbox holds (the training's other attacks read them)."""

    def infer(self, view):
        for received in view.inbox.received:
            with torch.no_grad():  # the embeddings it received are leaves that require grad
                received.payload.mul_(0.0)
        return super().infer(view)


class ZeroesTheMessagesThroughData(FeatureDecoder):
    """The same through ``.data``, which no version counter sees: the bytes' digest does."""

    def infer(self, view):
        for received in view.inbox.received:
            received.payload.data.mul_(0.0)
        return super().infer(view)


def test_a_plugin_zeroing_the_shared_messages_through_data_fails_its_run(tiny):
    ATTACKS.register("zeroes-messages-data", ZeroesTheMessagesThroughData)
    (bad,) = run(tiny(attack={"name": "zeroes-messages-data", "options": {"epochs": 5}}))
    assert bad.status == "failed" and "attack 'zeroes-messages-data' (" in bad.error and "changed in place" in bad.error


def test_a_label_plugin_zeroing_its_test_features_leaves_the_dataset_and_the_other_attacks_alone(tiny):
    """mc after it on the same training scored 0.099 (the passive party's test split was the dataset's own tensor,
    zeroed), and so did every later training of the process; the view now gets a copy."""
    from vflpriv.data.load import load_dataset

    config = tiny(attack={"name": "mc", "prior": "none"})
    dataset = load_dataset(config.dataset, parties=config.partition.parties)
    kept = [x.clone() for x in dataset.x_test]
    ATTACKS.register("zeroes-test", ZeroesItsTestFeatures)
    (alone,) = run(config)
    _, after = run([tiny(attack={"name": "zeroes-test", "prior": "none"}), config])
    assert all(torch.equal(x, k) for x, k in zip(dataset.x_test, kept))
    assert after.status == "ok" and after.attack_accuracy == alone.attack_accuracy


def test_a_label_plugin_changing_what_its_prior_reads_fails_its_run_naming_it(tiny):
    ATTACKS.register("zeroes-aux", ZeroesItsAuxFeatures)
    (spoiled,) = run(tiny(attack={"name": "zeroes-aux"}))
    assert spoiled.status == "failed", (spoiled.status, spoiled.prior_accuracy)
    assert "attack 'zeroes-aux' (" in spoiled.error and "ZeroesItsAuxFeatures" in spoiled.error, spoiled.error
    assert "changed in place" in spoiled.error


def test_a_plugin_zeroing_the_shared_messages_fails_its_run_and_the_later_ones_on_its_training(tiny):
    """fi-decoder after it on the same training read zeroed embeddings (MSE and prior as if nothing was sent)."""
    honest = tiny(attack={"name": "fi-decoder", "options": {"epochs": 5}})
    (alone,) = run(honest)
    ATTACKS.register("zeroes-messages", ZeroesTheMessages)
    later = tiny(attack={"name": "fi-decoder", "options": {"epochs": 6}})
    before, bad, after = run([honest, tiny(attack={"name": "zeroes-messages", "options": {"epochs": 5}}), later])
    assert before.status == "ok" and before.feature_mse == alone.feature_mse
    assert bad.status == "failed" and "attack 'zeroes-messages' (" in bad.error and "changed in place" in bad.error
    assert after.status == "failed" and "zeroes-messages" in after.error, (after.status, after.feature_mse)
