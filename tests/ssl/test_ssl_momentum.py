"""EMA target updates (FedHSSL Table II: BYOL and MoCo targets)."""

import copy

import pytest
import torch
from torch import nn

from vflpriv.common.errors import ConfigError
from vflpriv.models.ssl import momentum_copy, update_momentum
from vflpriv.models.ssl.momentum import flat_ema


def _pair() -> tuple[nn.Module, nn.Module]:
    """An online net and its momentum copy; then the online weights and BN stats move away."""
    g = torch.Generator().manual_seed(0)
    online = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    target = momentum_copy(online)
    with torch.no_grad():
        for p in online.parameters():
            p.add_(torch.randn(p.shape, generator=g))
    online.train()
    online(torch.randn(16, 3, generator=g) * 5 + 2)  # moves running_mean / running_var
    return online, target


def _state(m: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in m.state_dict().items() if v.is_floating_point()}


def test_m_zero_copies_online_including_bn_stats() -> None:
    online, target = _pair()
    update_momentum(online, target, m=0.0)
    for key, value in _state(online).items():
        assert torch.equal(target.state_dict()[key], value), key


def test_m_one_leaves_target_unchanged() -> None:
    online, target = _pair()
    before = _state(target)
    update_momentum(online, target, m=1.0)
    for key, value in before.items():
        assert torch.equal(target.state_dict()[key], value), key


def test_intermediate_m_matches_formula() -> None:
    online, target = _pair()
    before, src = _state(target), _state(online)
    update_momentum(online, target, m=0.9)
    assert {"1.running_mean", "1.running_var"} <= before.keys()
    for key in before:
        expected = 0.9 * before[key] + 0.1 * src[key]
        assert torch.allclose(target.state_dict()[key], expected, atol=1e-6), key


def test_momentum_copy_is_frozen_and_independent() -> None:
    online = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    target = momentum_copy(online)
    assert all(not p.requires_grad for p in target.parameters())
    assert all(p.requires_grad for p in online.parameters())
    for p, q in zip(online.parameters(), target.parameters()):
        assert torch.equal(p, q) and p.data_ptr() != q.data_ptr()


def test_out_of_range_momentum_is_rejected() -> None:
    online, target = _pair()
    with pytest.raises(ConfigError):
        update_momentum(online, target, m=1.5)


def test_flat_ema_keeps_values_and_one_lerp_is_the_per_tensor_update() -> None:
    """After :func:`flat_ema` the modules hold the same values, an EMA step on the buffers equals update_momentum
    bit for bit, and the online net still trains (gradients, in-place optimiser steps, BN statistics)."""
    online, target = _pair()
    ref_online, ref_target = copy.deepcopy(online), copy.deepcopy(target)
    before = _state(online), _state(target)
    flat_online, flat_target = flat_ema(online, target)
    assert all(torch.equal(a, b) for a, b in zip(before[0].values(), _state(online).values()))
    assert all(torch.equal(a, b) for a, b in zip(before[1].values(), _state(target).values()))
    for m in (0.9, 0.3):
        flat_target.lerp_(flat_online, 1.0 - m)
        update_momentum(ref_online, ref_target, m=m)
        for key, value in _state(ref_target).items():
            assert torch.equal(_state(target)[key], value), key
    x = torch.randn(8, 3, generator=torch.Generator().manual_seed(1))
    for net in (online, ref_online):
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        net(x).square().sum().backward()
        opt.step()
    assert all(torch.equal(a, b) for a, b in zip(_state(online).values(), _state(ref_online).values()))
    weight = online[0].weight
    assert weight.data_ptr() == flat_online.data_ptr()  # the first parameter is the buffer's first slice


def test_flat_ema_declines_mixed_dtypes() -> None:
    online = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2).double())
    assert flat_ema(online, momentum_copy(online)) is None
