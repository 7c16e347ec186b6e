"""Momentum (EMA) target encoders for BYOL and MoCo (FedHSSL Table II, Fig. 2)."""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from torch import Tensor, nn

from vflpriv.common.errors import ConfigError


def _ema_tensors(module: nn.Module) -> list[Tensor]:
    """Parameters followed by floating-point buffers (BN running mean/var), in module order.

    Integer buffers (BN ``num_batches_tracked``) are counters, not statistics, and are left alone.
    """
    buffers = [b for b in module.buffers() if b.is_floating_point()]
    return list(module.parameters()) + buffers


def update_momentum(online: nn.Module, target: nn.Module, *, m: float) -> None:
    """In place: target <- m * target + (1 - m) * online, for parameters and BN running stats.

    ``m=0`` copies the online weights, ``m=1`` leaves the target unchanged; the papers use
    0.99-0.999. ``online`` and ``target`` must have the same architecture.
    """
    momentum_updater(online, target)(m=m)


def momentum_updater(online: nn.Module, target: nn.Module) -> Callable[..., None]:
    """:func:`update_momentum` bound to two modules, their tensors gathered once: for loops that update every
    step (gathering walks the module tree, about as long as the update itself on small models). The
    modules' structure must not change while the updater is in use."""
    src, dst = _ema_tensors(online), _ema_tensors(target)
    if len(src) != len(dst):
        raise ValueError("online and target modules have different parameter/buffer layouts")

    @torch.no_grad()
    def update(*, m: float) -> None:
        if not 0.0 <= m <= 1.0:
            raise ConfigError(f"momentum m must lie in [0, 1], got {m}")
        for d, s in zip(dst, src):
            d.lerp_(s, 1.0 - m)

    return update


def flat_ema(online: nn.Module, target: nn.Module) -> tuple[Tensor, Tensor] | None:
    """(online, target): each module's EMA tensors (:func:`_ema_tensors`: parameters, then floating-point buffers)
    re-pointed at slices of one contiguous buffer of their own, values unchanged, so that one in-place op on a buffer
    updates them all (``target.lerp_(online, 1 - m)``: the EMA of :func:`update_momentum` in one kernel instead of one
    per tensor). None when the tensors mix dtypes or devices (use :func:`momentum_updater` then). Optimisers and
    autograd keep working on the same parameter objects; the modules' structure must not change afterwards."""
    src, dst = _ema_tensors(online), _ema_tensors(target)
    if len(src) != len(dst) or any(a.shape != b.shape for a, b in zip(src, dst)):
        raise ValueError("online and target modules have different parameter/buffer layouts")
    if not src or len({(t.dtype, t.device) for t in src + dst}) != 1:
        return None
    return _share_one_buffer(src), _share_one_buffer(dst)


@torch.no_grad()
def _share_one_buffer(tensors: list[Tensor]) -> Tensor:
    flat = torch.cat([t.detach().reshape(-1) for t in tensors])
    offset = 0
    for t in tensors:
        t.data = flat[offset:offset + t.numel()].view_as(t)
        offset += t.numel()
    return flat


def momentum_copy(module: nn.Module) -> nn.Module:
    """A deep copy with ``requires_grad=False`` everywhere, to serve as an EMA target encoder."""
    target = copy.deepcopy(module)
    target.requires_grad_(False)
    return target
