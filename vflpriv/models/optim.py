"""Adam and SGD with momentum as single fused kernels, step for step identical to ``torch.optim``'s fused ones.

Why not ``torch.optim`` itself: every ``Optimizer.step`` goes through wrappers that import ``torch._dynamo``
(about 2 s in each new process, once per sweep worker) and cost about 0.3 ms per step, which is a third
of a step on these small models. These classes call the same kernels (``torch._fused_adam_``,
``torch._fused_sgd_``) with the same state, so the numbers are bit-identical (tested against
``torch.optim.Adam(fused=True)`` and ``torch.optim.SGD(fused=True)``).

The surface is what vflpriv's loops use: ``param_groups`` (a list of dicts, with ``lr`` writable per
group), ``zero_grad(set_to_none=True)`` and ``step()``. Parameters without a gradient are skipped.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor


def _as_groups(params: Iterable[Any], defaults: dict[str, Any]) -> list[dict[str, Any]]:
    """Param groups from parameters or dicts, each with the defaults it does not set."""
    items = list(params)
    groups = items if items and isinstance(items[0], dict) else [{"params": items}]
    return [{**defaults, **g, "params": list(g["params"])} for g in groups]


class _Fused(ABC):
    """Shared parts: param groups, per-parameter state, zeroing gradients."""

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]) -> None:
        self.param_groups = _as_groups(params, defaults)
        self.state: dict[Tensor, dict[str, Tensor]] = {}

    def add_param_group(self, group: dict[str, Any]) -> None:
        """Train more parameters from now on, with this optimiser's defaults unless ``group`` sets them."""
        self.param_groups += _as_groups([group], {k: v for k, v in self.param_groups[0].items() if k != "params"})

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        """Update every group's parameters that have a gradient."""
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if params:
                self._step_group(group, params)

    @abstractmethod
    def _step_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        """One update of ``params`` (those of ``group`` that have a gradient)."""


class FusedAdam(_Fused):
    """Adam (Kingma & Ba; L2 weight decay added to the gradient, as ``torch.optim.Adam``)."""

    def __init__(self, params: Iterable[Any], *, lr: float, weight_decay: float = 0.0,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
        super().__init__(params, {"lr": lr, "weight_decay": weight_decay, "betas": betas, "eps": eps})

    def _step_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        states = [self._state(p) for p in params]
        steps = [s["step"] for s in states]
        torch._foreach_add_(steps, 1)
        beta1, beta2 = group["betas"]
        torch._fused_adam_(
            params, [p.grad for p in params], [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states],
            [], steps, amsgrad=False, lr=group["lr"], beta1=beta1, beta2=beta2,
            weight_decay=group["weight_decay"], eps=group["eps"], maximize=False,
        )

    def _state(self, p: Tensor) -> dict[str, Tensor]:
        state = self.state.get(p)
        if state is None:
            state = self.state[p] = {
                "step": torch.zeros((), dtype=torch.float32, device=p.device),
                "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
            }
        return state


class FusedSGD(_Fused):
    """SGD with heavy-ball momentum (no dampening, no Nesterov) and L2 weight decay, as ``torch.optim.SGD``."""

    def __init__(self, params: Iterable[Any], *, lr: float, momentum: float = 0.0, weight_decay: float = 0.0) -> None:
        super().__init__(params, {"lr": lr, "momentum": momentum, "weight_decay": weight_decay})

    def _step_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        if group["momentum"] == 0:
            self._update(group, params, [], first=False)
            return
        fresh = [p for p in params if p not in self.state]  # their buffer starts as the gradient
        seen = [p for p in params if p in self.state]
        for p in fresh:
            self.state[p] = {"momentum_buffer": torch.empty_like(p.grad)}
        for subset, first in ((fresh, True), (seen, False)):
            if subset:
                self._update(group, subset, [self.state[p]["momentum_buffer"] for p in subset], first=first)

    @staticmethod
    def _update(group: dict[str, Any], params: list[Tensor], buffers: list[Tensor], *, first: bool) -> None:
        torch._fused_sgd_(
            params, [p.grad for p in params], buffers, weight_decay=group["weight_decay"],
            momentum=group["momentum"], lr=group["lr"], dampening=0.0, nesterov=False, maximize=False,
            is_first_step=first,
        )
