"""Conformance in the directions feature attacks need: the active party's own models (a pretraining snapshot the
active adversary attacks) and passive -> passive with more than two parties, each must hold only what crossed."""

from __future__ import annotations

import pytest
import torch

from vflpriv.common.errors import ConformanceError
from vflpriv.config.registry import METHODS
from vflpriv.config.schema import TrainingConfig
from vflpriv.methods.splitnn import SplitNN
from vflpriv.workflows.conformance import check_conformance

SMALL = {"model": {"hidden": 32, "out_dim": 16}, "finetune": {"epochs": 1, "batch_size": 32},
         "partition": {"labeled": 60, "aux": 20}}


class _ActivePretrainingReadsPassive(SplitNN):
    """'Pretrains' the active party's encoder with the passive features' mean read around the channel, then finetunes
    fresh bottoms: the test logits never see it, the active party's pretraining snapshot does."""

    pretrains = True
    skeleton = None

    def pretrain(self, fed):
        encoders = self.fresh_bottoms(fed)
        with torch.no_grad():
            next(encoders[0].parameters()).add_(fed.parties[1].x_train[fed.aligned].float().mean())
        return encoders

    def finetune(self, fed, pretrained):
        return super().finetune(fed, None)


class _PassiveToPassive(SplitNN):
    """Party 2's bottom reads party 1's features around the channel (the active party never sees it)."""

    def finetune(self, fed, pretrained):
        trained = super().finetune(fed, pretrained)
        with torch.no_grad():
            next(trained.bottoms[2].parameters()).add_(fed.parties[1].x_train[fed.aligned].float().mean())
        return trained


def test_the_active_party_s_own_models_must_hold_only_what_crossed():
    METHODS.register("test-active-pretraining-reads-passive", _ActivePretrainingReadsPassive)
    config = {**SMALL, "method": {"name": "test-active-pretraining-reads-passive"}}
    with pytest.raises(ConformanceError, match="reach the active party's pretraining model without the channel"):
        check_conformance(TrainingConfig.model_validate(config))


def test_with_four_parties_each_passive_party_s_features_reach_the_others_only_through_the_channel():
    METHODS.register("test-passive-to-passive", _PassiveToPassive)
    config = {**SMALL, "partition": {"parties": 4, "labeled": 60, "aux": 20}}
    with pytest.raises(ConformanceError, match="passive party 1's features reach passive party 2's model"):
        check_conformance(TrainingConfig.model_validate({**config, "method": {"name": "test-passive-to-passive"}}))
    passed = check_conformance(TrainingConfig.model_validate({**config, "method": {"name": "splitnn"}}))
    assert "each passive party's features reach the other passive parties only through the channel" in passed
