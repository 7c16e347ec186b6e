"""Conformance at its edges: the rolls move every sample's features to another sample's whatever the sample count and
width; the active party's test features count as its data; a party's own test features and the active party's own
embeddings are not held against a method."""

from __future__ import annotations

import pytest
import torch

from vflpriv.common.errors import ConformanceError
from vflpriv.config.registry import METHODS
from vflpriv.config.schema import TrainingConfig
from vflpriv.engine import ACTIVE, EMBEDDING, FINETUNE, SPLIT_LEARNING, Message
from vflpriv.methods.splitnn import SplitNN
from vflpriv.workflows.conformance import _roll, check_conformance

SMALL = {"model": {"hidden": 32, "out_dim": 16}, "finetune": {"epochs": 1, "batch_size": 32},
         "partition": {"labeled": 60, "aux": 20}}


@pytest.mark.parametrize("shape", [(2, 1), (3, 5), (4, 8), (5, 1), (6, 12), (7, 3), (9, 2), (4, 1, 3, 8)])
def test_the_roll_gives_every_sample_another_sample_s_features_and_leaves_other_parties_alone(shape):
    """Distinct rows, so a row equal to another row's original moved; widths 1 and equal to the sample count are
    where a shift computed from the wrong axis, or a third of the samples, moves nothing."""
    n = shape[0]
    x = torch.arange(n * torch.Size(shape[1:]).numel(), dtype=torch.float).reshape(shape)
    other = torch.randn(shape)
    rolled, kept = _roll((x, other), {0})
    assert kept is other and rolled.shape == x.shape
    flat, moved = x.reshape(n, -1), rolled.reshape(n, -1)
    for i in range(n):
        source = [j for j in range(n) if torch.equal(moved[i], flat[j])]
        assert source and source[0] != i, (i, source)


class _ActiveTestFeaturesToPassive(SplitNN):
    """Hands the passive party a statistic of the active party's first test rows outside the channel."""

    def finetune(self, fed, pretrained):
        trained = super().finetune(fed, pretrained)
        with torch.no_grad():
            next(trained.bottoms[1].parameters()).add_(fed.active.x_test[:5].float().mean())
        return trained


class _OwnTestFeatures(SplitNN):
    """Transductive: the passive party adjusts its bottom by a statistic of its own first test rows (its own data)."""

    def finetune(self, fed, pretrained):
        trained = super().finetune(fed, pretrained)
        with torch.no_grad():
            next(trained.bottoms[1].parameters()).add_(fed.parties[1].x_test[:5].float().mean())
        return trained


class _ActiveSendsItsEmbedding(SplitNN):
    """Split learning whose active party also sends the passive party a (declared) embedding of 3 units in
    finetuning, which the passive party ignores: the width check is about passive parties' embeddings."""

    sends = SPLIT_LEARNING | {("active", EMBEDDING, FINETUNE)}

    def finetune(self, fed, pretrained):
        batch = fed.labeled_aligned()[:4]
        fed.channel.send(Message(EMBEDDING, FINETUNE, ACTIVE, 1, fed.active.x_train[batch].flatten(1)[:, :3], batch))
        return super().finetune(fed, pretrained)


def _check(name: str, cls) -> list[str]:
    METHODS.register(name, cls)
    return check_conformance(TrainingConfig.model_validate({**SMALL, "method": {"name": name}}))


def test_the_active_party_s_test_features_reaching_a_passive_party_are_refused():
    with pytest.raises(ConformanceError, match="lets the active party's data reach passive party 1's model"):
        _check("test-active-test-features", _ActiveTestFeaturesToPassive)


def test_a_passive_party_using_its_own_test_features_passes():
    assert "the active party's features and labels reach the passive parties only through the channel" in _check(
        "test-own-test-features", _OwnTestFeatures)


def test_an_embedding_the_active_party_sends_is_not_measured_as_a_passive_one():
    assert "passive embeddings of the declared width (16 units)" in _check("test-active-embedding",
                                                                            _ActiveSendsItsEmbedding)
