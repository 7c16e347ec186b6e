"""Optuna's TPE sampler is seeded from the run's own stream over billions of values (any seed below 2**32),
so different run seeds search the space with different samplers (a small range would give many run seeds one sampler:
fewer distinct searches than seeds)."""

from __future__ import annotations

import pytest
import torch
from attack_helpers import gradient_view
from pydantic import Field

from vflpriv.attacks.base import Attack
from vflpriv.attacks.search import search
from vflpriv.config.options import Options


class _Options(Options):
    skill: float = Field(0.5, ge=0, le=1)


class _Untrained(Attack):
    """Never reached: the sampler's construction stops the search."""

    Options = _Options
    search_space = {"skill": (0.1, 0.2, 0.3, 0.5, 0.8, 1.0)}

    def infer(self, view):  # pragma: no cover - the search stops before any trial
        raise AssertionError("no trial runs in this test")


class _Stop(Exception):
    pass


def test_the_tpe_seed_comes_from_the_run_s_stream_and_differs_between_run_seeds(monkeypatch):
    optuna = pytest.importorskip("optuna")
    drawn = []

    def sampler(*, seed):
        drawn.append(seed)
        raise _Stop

    monkeypatch.setattr(optuna.samplers, "TPESampler", sampler)
    labels = torch.arange(40) % 4
    view = gradient_view(torch.randn(20, 5), labels_aux=labels, feats_train=torch.randn(20, 3),
                         feats_aux=torch.randn(40, 3), num_classes=4)
    for seed in [*range(100), 0]:
        with pytest.raises(_Stop):
            search(_Untrained(_Options()), view, budget=2, seed=seed, refit=lambda winner: {})
    assert drawn[0] == drawn[-1]  # the same run seed, the same sampler
    assert len(set(drawn[:-1])) == 100 and all(0 <= s < 2**32 for s in drawn)  # numpy's seed range
