"""Verdicts a feature audit must reach: a passive bottom that outputs a constant, or embeddings replaced by noise,
leak nothing beyond the feature prior ("no"); the real embeddings of the same training do leak ("yes")."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from torch import nn

from feature_helpers import register_independent
from vflpriv.config.registry import DEFENSES, METHODS
from vflpriv.config.schema import RunConfig
from vflpriv.defenses.base import Defense
from vflpriv.methods.splitnn import SplitNN
from vflpriv.runner.execution import run
from vflpriv.tradeoff.leakage import leakage_test


class _Constant(nn.Module):
    def __init__(self, out_dim: int):
        super().__init__()
        self.out_dim = out_dim

    def forward(self, x):
        return torch.ones(x.shape[0], self.out_dim, device=x.device)


class _ConstantPassive(SplitNN):
    """Split learning whose passive party's bottom outputs a constant (it sends nothing of its features)."""

    def fresh_bottoms(self, fed):
        bottoms = super().fresh_bottoms(fed)
        return [bottoms[0], *(_Constant(fed.model.out_dim) for _ in bottoms[1:])]


class _NoiseInstead(Defense):
    """Every embedding the protecting party sends replaced by N(0, 1) noise of its shape."""

    default_kinds = ("embedding",)
    supported_kinds = ("embedding",)

    def transform(self, tensor, message):
        return torch.randn(tensor.shape, generator=self.generator, dtype=tensor.dtype)


def _config(seed: int, **changes) -> RunConfig:
    data = {"dataset": {"name": register_independent()}, "seed": seed,
            "partition": {"aligned_fraction": 0.5, "labeled": 400, "aux": 20, "aux_features": 100},
            "model": {"hidden": 32, "out_dim": 16}, "finetune": {"epochs": 3, "batch_size": 64},
            "attack": {"name": "fi-decoder"}, **changes}
    return RunConfig.model_validate(data)


def _verdict(records) -> str:
    frame = pd.DataFrame([r.to_dict() for r in records])
    assert (frame["status"] == "ok").all(), frame["error"].tolist()
    return leakage_test(frame).verdict


@pytest.mark.parametrize("how", ["constant bottom", "noise instead of embeddings"])
def test_nothing_of_the_victim_s_features_in_the_messages_reads_no(how):
    METHODS.register("test-constant-passive", _ConstantPassive)
    DEFENSES.register("test-noise-instead", _NoiseInstead)
    changes = ({"method": {"name": "test-constant-passive"}} if how == "constant bottom"
               else {"defenses": [{"name": "test-noise-instead", "party": 1, "strength": 1.0}]})
    records = [r for seed in (0, 1, 2) for r in run(_config(seed, **changes))]
    assert _verdict(records) == "no"


def test_the_same_training_s_real_embeddings_read_yes():
    records = [r for seed in (0, 1, 2) for r in run(_config(seed))]
    assert _verdict(records) == "yes"
