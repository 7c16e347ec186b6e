"""embedding-dp's premise (each sent row a function of its own sample) on bottoms that are not vflpriv's own: checked on
the batch's values, it is tested, not proven, so such a bottom gets no epsilon, and the run says why (issue 47)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from vflpriv.defenses.embedding_dp import EmbeddingDP
from vflpriv.defenses.own_modules import foreign_part
from vflpriv.runner.execution import run

sys.path.insert(0, str(Path(__file__).parent))
from test_embedding_dp import _config  # noqa: E402


class _Impute(nn.Module):
    """Batch-mean imputation of missing entries: mixes rows only when a NaN appears (the review's e_gated.py)."""

    def forward(self, x):
        return torch.where(torch.isnan(x), torch.nanmean(x, 0, keepdim=True).expand_as(x), x)


def _prepend(monkeypatch, make) -> None:
    """Every bottom embedding-dp wraps gets ``make(bottom)`` in front of it (a plugin bottom)."""
    wrap = EmbeddingDP.passive_bottom

    def patched(self, party, bottom):
        seq = nn.Sequential(make(bottom), bottom)
        seq.out_dim = bottom.out_dim
        return wrap(self, party, seq)

    monkeypatch.setattr(EmbeddingDP, "passive_bottom", patched)


def test_a_plugin_bottom_whose_mixing_the_batch_does_not_show_gets_no_epsilon_and_the_reason(monkeypatch):
    _prepend(monkeypatch, lambda bottom: _Impute())
    (record,) = run([_config(sigma=4.0, epochs=1)])
    assert record.status == "ok"
    assert math.isnan(record.epsilon_features)
    assert "no epsilon recorded" in record.notes and "not proven" in record.notes


def test_vflpriv_own_bottom_with_torch_modules_keeps_its_epsilon(monkeypatch):
    _prepend(monkeypatch, lambda bottom: nn.Identity())
    (record,) = run([_config(sigma=4.0, epochs=1)])
    assert record.status == "ok" and math.isfinite(record.epsilon_features)


def test_what_makes_a_bottom_foreign():
    assert foreign_part(nn.Sequential(nn.Linear(3, 3), nn.ReLU())) == ""
    assert "_Impute" in foreign_part(nn.Sequential(_Impute(), nn.Linear(3, 3)))
    own = nn.Linear(3, 3)
    own.forward = lambda x: x  # an instance method: the class's forward is not what runs
    assert "forward" in foreign_part(nn.Sequential(own))
    hooked = nn.Linear(3, 3)
    hooked.register_forward_pre_hook(lambda m, a: a)
    assert "hook" in foreign_part(hooked)
    handle = nn.modules.module.register_module_forward_hook(lambda m, a, o: o)
    try:
        assert "hook" in foreign_part(nn.Linear(3, 3))
    finally:
        handle.remove()
