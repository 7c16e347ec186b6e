"""Marvell (Li et al. 2022): the per-batch solve is optimal under its power budget, and the noise it
adds pushes the norm attack's leak AUC toward 0.5 on a synthetic binary task."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from vflpriv.common import metrics
from vflpriv.common.errors import IncompatibleError
from vflpriv.config.parse import NoOptions
from vflpriv.config.schema import RunConfig
from vflpriv.defenses.marvell import Marvell, MarvellNoise, solve_marvell, sym_kl
from vflpriv.engine import FINETUNE, GRADIENT, Message
from vflpriv.runner.planning import plan


def _marvell(strength, labels, seed=0):
    defense = Marvell(strength=strength, party=0, phase=FINETUNE, kinds=None, options=NoOptions(),
                      generator=torch.Generator().manual_seed(seed))
    defense.bind(SimpleNamespace(active=SimpleNamespace(labels=labels)))
    return defense


def _batches(n_batches=30, b=64, d=16, seed=0):
    """Li et al.'s picture: g_i = (p_i - y_i) w, positives (rare) far from 0, negatives near it."""
    g = torch.Generator().manual_seed(seed)
    y = (torch.rand(n_batches * b, generator=g) < 0.25).long()
    w = torch.randn(d, generator=g)
    p = 0.2 + 0.1 * torch.rand(y.numel(), generator=g)
    grads = (p - y)[:, None] * w + 0.02 * torch.randn(y.numel(), d, generator=g)
    return y, grads, torch.arange(y.numel()).split(b)


def _norm_leak_auc(defense, y, grads, batches):
    aucs = []
    for ids in batches:
        out = grads[ids] if defense is None else defense(grads[ids], Message(GRADIENT, FINETUNE, 0, 1, grads[ids], ids))
        aucs.append(metrics.auc(out.norm(dim=1), y[ids]))
    return float(np.nanmean(aucs))


def test_marvell_pushes_the_norm_leak_auc_toward_one_half():
    y, grads, batches = _batches()
    unprotected = _norm_leak_auc(None, y, grads, batches)
    weak = _norm_leak_auc(_marvell(0.25, y), y, grads, batches)
    strong = _norm_leak_auc(_marvell(4.0, y), y, grads, batches)
    assert unprotected > 0.99
    assert abs(strong - 0.5) < abs(weak - 0.5) < abs(unprotected - 0.5)
    assert abs(strong - 0.5) < 0.15


@pytest.mark.parametrize("seed", range(5))
def test_solution_spends_the_budget_and_beats_random_feasible_noise(seed):
    rng = np.random.default_rng(seed)
    u, v, g, p = rng.uniform(0.01, 1.0), rng.uniform(0.01, 1.0), rng.uniform(0.5, 5.0), rng.uniform(0.1, 0.9)
    d, power = int(rng.integers(2, 20)), rng.uniform(0.1, 4.0) * g
    best = solve_marvell(u=u, v=v, d=d, g=g, p=p, power=power)
    spent = p * (best.lam11 + (d - 1) * best.lam21) + (1 - p) * (best.lam10 + (d - 1) * best.lam20)
    assert spent == pytest.approx(power, rel=1e-6)
    found = sym_kl(best, u=u, v=v, d=d, g=g)
    for w in rng.dirichlet(np.ones(4), size=500):  # random feasible covariances on the same budget
        l20, l21 = w[2] * power / ((1 - p) * d), w[3] * power / (p * d)
        rest = power - (1 - p) * d * l20 - p * d * l21
        l10 = l20 + w[0] / (w[0] + w[1]) * rest / (1 - p)
        l11 = l21 + w[1] / (w[0] + w[1]) * rest / p
        assert found <= sym_kl(MarvellNoise(l10, l20, l11, l21), u=u, v=v, d=d, g=g) + 1e-9
    assert found < sym_kl(MarvellNoise(0, 0, 0, 0), u=u, v=v, d=d, g=g)


def test_single_class_batch_reuses_the_last_solution_and_strength_zero_is_identity():
    y, grads, _ = _batches()
    defense = _marvell(1.0, y)
    only_neg = (y == 0).nonzero().flatten()[:8]
    first = grads[only_neg]
    assert torch.equal(defense(first, Message(GRADIENT, FINETUNE, 0, 1, first, only_neg)), first)
    ids = torch.arange(64)
    defense(grads[ids], Message(GRADIENT, FINETUNE, 0, 1, grads[ids], ids))
    assert not torch.equal(defense(first, Message(GRADIENT, FINETUNE, 0, 1, first, only_neg)), first)
    assert _marvell(0.0, y)(first, Message(GRADIENT, FINETUNE, 0, 1, first, only_neg)) is first


def test_marvell_is_refused_on_a_multiclass_task():
    with pytest.raises(IncompatibleError, match="binary"):
        plan(RunConfig.model_validate({"defenses": [{"name": "marvell", "strength": 1.0}]}))
