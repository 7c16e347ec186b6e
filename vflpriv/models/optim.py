"""Adam and SGD with momentum as single fused kernels, through torch's public functional optimisers.

Each step calls ``torch.optim.adam.adam`` / ``torch.optim.sgd.sgd`` (public: in those modules' ``__all__``) with
``fused=True``: one kernel per step, on these small models 2x (SGD) to 11x (Adam) faster on the CPU than the
multi-tensor (foreach) updates, and bit-identical to ``torch.optim.Adam(fused=True)`` / ``SGD(fused=True)`` (tested).
Not the ``torch.optim`` classes themselves: their ``step`` wrappers import ``torch._dynamo`` in every new process
(about 1 s, once per sweep worker) and add a third to a half of a step on these models
(``benchmarks/optimizers.py`` measures both). 0.1 called torch's private fused kernels directly, which broke where
the CUDA kernel is stricter than the CPU one; two of the kernels' preconditions are now made to hold instead:

- every gradient has its parameter's layout: the CUDA kernel refuses a gradient that is a strided view (BLI's dummy
  embedding's is a slice of a concatenation's gradient), so such a gradient is first copied into the parameter's
  layout, which changes no value;
- one step never mixes starting and updating momentum buffers (torch's fused SGD cannot): each buffer starts at
  zero when its parameter first has a gradient, so its first update is exactly that gradient (0.9 * 0 + g = g), as
  ``torch.optim.SGD`` starts it.

The surface is what vflpriv's loops use: ``param_groups`` (a list of dicts, with ``lr`` writable per group),
``add_param_group``, ``zero_grad(set_to_none=True)`` and ``step()``. Parameters without a gradient are skipped.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor
from torch.optim.adam import adam
from torch.optim.sgd import sgd

#: Devices whose fused Adam and SGD kernels torch ships (elsewhere torch picks its default implementation).
FUSED_DEVICES = ("cpu", "cuda")


def _as_groups(params: Iterable[Any], defaults: dict[str, Any]) -> list[dict[str, Any]]:
    """Param groups from parameters or dicts, each with the defaults it does not set."""
    items = list(params)
    groups = items if items and isinstance(items[0], dict) else [{"params": items}]
    return [{**defaults, **g, "params": list(g["params"])} for g in groups]


def conforming_gradients(params: list[Tensor]) -> list[Tensor]:
    """Each parameter's gradient in the parameter's own layout (a copy where it is not; the same tensor where it is)."""
    grads = []
    for p in params:
        g = p.grad
        if g.stride() != p.stride():
            g = p.grad = torch.empty_like(p).copy_(g)
        grads.append(g)
    return grads


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
                fused = True if all(p.device.type in FUSED_DEVICES for p in params) else None
                self._step_group(group, params, conforming_gradients(params), fused)

    @abstractmethod
    def _step_group(self, group: dict[str, Any], params: list[Tensor], grads: list[Tensor], fused: bool | None) -> None:
        """One update of ``params`` (those of ``group`` that have a gradient)."""


class FusedAdam(_Fused):
    """Adam (Kingma & Ba; L2 weight decay added to the gradient, as ``torch.optim.Adam``)."""

    def __init__(self, params: Iterable[Any], *, lr: float, weight_decay: float = 0.0,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
        super().__init__(params, {"lr": lr, "weight_decay": weight_decay, "betas": betas, "eps": eps})

    def _step_group(self, group: dict[str, Any], params: list[Tensor], grads: list[Tensor], fused: bool | None) -> None:
        states = [self._state(p) for p in params]
        beta1, beta2 = group["betas"]
        adam(params, grads, [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states], [],
             [s["step"] for s in states], fused=fused, amsgrad=False, beta1=beta1, beta2=beta2, lr=group["lr"],
             weight_decay=group["weight_decay"], eps=group["eps"], maximize=False)

    def _state(self, p: Tensor) -> dict[str, Tensor]:
        state = self.state.get(p)
        if state is None:  # as torch.optim.Adam's: a float32 step counter on the parameter's device
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

    def _step_group(self, group: dict[str, Any], params: list[Tensor], grads: list[Tensor], fused: bool | None) -> None:
        buffers = []
        if group["momentum"] != 0:
            for p in params:
                if p not in self.state:  # starts at zero: its first update is its first gradient
                    self.state[p] = {"momentum_buffer": torch.zeros_like(p, memory_format=torch.preserve_format)}
                buffers.append(self.state[p]["momentum_buffer"])
        sgd(params, grads, buffers, fused=fused, weight_decay=group["weight_decay"], momentum=group["momentum"],
            lr=group["lr"], dampening=0.0, nesterov=False, maximize=False)


Optimizer = FusedAdam | FusedSGD

