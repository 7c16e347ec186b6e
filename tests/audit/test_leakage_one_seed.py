"""The per-target test on one seed: its interval is that training's own (McNemar variance, normal 95%), finite
whatever the outcomes, since no between-seed variance can be estimated from one seed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vflpriv.tradeoff.leakage import sample_paired_leakage


def _hits(bits: np.ndarray) -> str:
    return "".join(map(str, bits.tolist()))


def test_one_seed_s_interval_is_its_own_mcnemar_interval_for_any_outcomes():
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(2, 400))
        attack, prior = rng.integers(0, 2, n), rng.integers(0, 2, n)
        if (attack == prior).all():
            continue  # no sampling noise: the zero-variance branch, tested apart
        d = (attack - prior).astype(float)
        half = 1.96 * math.sqrt(d.var(ddof=1) / n)
        test = sample_paired_leakage([_hits(attack)], [_hits(prior)])
        assert test.n_seeds == 1 and test.leakage == pytest.approx(d.mean())
        assert (test.ci_low, test.ci_high) == pytest.approx((d.mean() - half, d.mean() + half)), (n, d.mean())
