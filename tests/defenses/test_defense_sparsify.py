"""Gradient sparsification zeroes exactly the stated fraction: the smallest entries in magnitude."""

import pytest
import torch

from vflpriv.common.errors import ConfigError
from vflpriv.defenses.sparsify import Sparsify
from vflpriv.engine import FINETUNE, GRADIENT, Message


def _sparsify(q):
    return Sparsify(strength=q, party=0, phase=FINETUNE, kinds=None, options=Sparsify.Options(),
                    generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("q", [0.0, 50.0, 95.0, 99.0, 100.0])
def test_zeroes_the_stated_fraction_of_smallest_entries(q):
    d = torch.randn(64, 37, generator=torch.Generator().manual_seed(1))
    out = _sparsify(q)(d, Message(GRADIENT, FINETUNE, 0, 1, d))
    zeroed = out == 0
    assert int(zeroed.sum()) == int(q / 100 * d.numel())
    kept = ~zeroed
    assert torch.equal(out[kept], d[kept])
    if zeroed.any() and kept.any():
        assert d[zeroed].abs().max() <= d[kept].abs().min()


def test_percentile_outside_0_100_is_refused():
    with pytest.raises(ConfigError, match="percentile"):
        _sparsify(120.0)
