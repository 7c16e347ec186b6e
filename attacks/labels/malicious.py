"""Active model completion (Fu et al. 2022, "Label Inference Attacks Against Vertical Federated Learning", §4.3):
the adversary trains its own bottom with a malicious local optimiser, then completes its model as ``mc-mixmatch``.

The malicious optimiser scales each element of its update by r = clamp(1 + gamma * u_t / (u_{t-1} + 1e-7), 1, 5),
u_{t-1} the previous (scaled) update of that element: steps that keep their direction grow up to five times, so
the adversary's bottom learns faster than the others and the top model leans on it, which makes the bottom a
better feature extractor for its own model completion afterwards.

- SGD (Fu et al. ``Code/my_optimizers.py``, ``MaliciousSGD``): on the gradient after weight decay and momentum.
  In their code the scaled gradient aliases the momentum buffer (``p.grad.data = buf`` then ``p.grad.mul_``),
  so the buffer carries the scaling into the next step; kept as they wrote it.
- Adam (VFLAIR ``src/utils/optimizers.py``, ``MaliciousAdam``): on the Adam direction m_hat / (sqrt(v_hat) + eps).

The adversary follows the federation's recipe (``finetune.optimizer``, lr, weight decay, momentum) with the
malicious scaling on top, so the attack changes only what it owns. gamma (``gamma_lr_scale_up``) 1.0, ratios in
[1, 5]: both anchors' values. Fu et al.'s global ``near_minimum`` switch is never set in their code (off).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from pydantic import Field, model_validator
from torch import Tensor, nn

from vflpriv.attacks.labels.mixmatch import MixMatchCompletion, MixMatchOptions


class _Malicious:
    """Param groups (``lr`` writable: the cosine schedule), per-parameter state, the ratio rule."""

    def __init__(self, params: list[nn.Parameter], defaults: dict[str, Any], *, gamma: float, min_ratio: float,
                 max_ratio: float):
        self.param_groups = [{**defaults, "params": [p for p in params if p.requires_grad]}]
        self.state: dict[Tensor, dict[str, Tensor]] = {}
        self.gamma, self.min_ratio, self.max_ratio = gamma, min_ratio, max_ratio

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.param_groups[0]["params"]:
            p.grad = None

    def scaled(self, p: Tensor, update: Tensor) -> Tensor:
        """``update`` scaled element-wise by the ratio to the previous scaled update (none on the first step), in place."""
        state = self.state.setdefault(p, {})
        last = state.get("last")
        if last is not None:
            update.mul_((1.0 + self.gamma * update / (last + 1e-7)).clamp_(self.min_ratio, self.max_ratio))
        state["last"] = update.clone()
        return update


class MaliciousSGD(_Malicious):
    """Fu et al.'s MaliciousSGD: SGD with L2 decay and heavy-ball momentum, each step's gradient scaled."""

    def __init__(self, params, *, lr: float, momentum: float = 0.0, weight_decay: float = 0.0, gamma: float = 1.0,
                 min_ratio: float = 1.0, max_ratio: float = 5.0):
        super().__init__(params, {"lr": lr, "momentum": momentum, "weight_decay": weight_decay}, gamma=gamma,
                         min_ratio=min_ratio, max_ratio=max_ratio)

    @torch.no_grad()
    def step(self) -> None:
        group = self.param_groups[0]
        for p in group["params"]:
            if p.grad is None:
                continue
            g = p.grad.add(p, alpha=group["weight_decay"]) if group["weight_decay"] else p.grad.clone()
            if group["momentum"]:
                state = self.state.setdefault(p, {})
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = g
                else:
                    buf.mul_(group["momentum"]).add_(g)
                g = buf  # aliased: the scaling below lands in the buffer too (Fu et al.)
            p.add_(self.scaled(p, g), alpha=-group["lr"])


class MaliciousAdam(_Malicious):
    """VFLAIR's MaliciousAdam: Adam's direction m_hat / (sqrt(v_hat) + eps), scaled (L2 decay in the gradient)."""

    def __init__(self, params, *, lr: float, weight_decay: float = 0.0, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, gamma: float = 1.0, min_ratio: float = 1.0, max_ratio: float = 5.0):
        super().__init__(params, {"lr": lr, "weight_decay": weight_decay, "betas": betas, "eps": eps}, gamma=gamma,
                         min_ratio=min_ratio, max_ratio=max_ratio)

    @torch.no_grad()
    def step(self) -> None:
        group = self.param_groups[0]
        beta1, beta2 = group["betas"]
        for p in group["params"]:
            if p.grad is None:
                continue
            g = p.grad.add(p, alpha=group["weight_decay"]) if group["weight_decay"] else p.grad
            state = self.state.setdefault(p, {})
            if "step" not in state:
                state.update(step=0, exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))
            state["step"] += 1
            t = state["step"]
            state["exp_avg"].mul_(beta1).add_(g, alpha=1 - beta1)
            state["exp_avg_sq"].mul_(beta2).addcmul_(g, g, value=1 - beta2)
            denom = (state["exp_avg_sq"].sqrt() / (1 - beta2 ** t) ** 0.5).add_(group["eps"])
            direction = state["exp_avg"] / ((1 - beta1 ** t) * denom)
            p.add_(self.scaled(p, direction), alpha=-group["lr"])


class MaliciousOptions(MixMatchOptions):
    gamma: float = Field(1.0, ge=0, description="gamma_lr_scale_up of the ratio 1 + gamma u_t / u_{t-1} (Fu, VFLAIR: 1)")
    min_ratio: float = Field(1.0, gt=0, description="lower clamp of the ratio (Fu, VFLAIR: 1)")
    max_ratio: float = Field(5.0, gt=0, description="upper clamp of the ratio (Fu, VFLAIR: 5)")

    @model_validator(mode="after")
    def _ratios_ordered(self) -> MaliciousOptions:
        if self.min_ratio > self.max_ratio:
            raise ValueError(f"min_ratio {self.min_ratio:g} exceeds max_ratio {self.max_ratio:g}")
        return self


class MaliciousBehaviour:
    """The adversary's optimiser: the federation's recipe, malicious (SGD: Fu et al.; Adam: VFLAIR)."""

    def __init__(self, options: MaliciousOptions):
        self.options = options

    def optimizer(self, params: list[nn.Parameter], recipe: Any, make: Callable[[], Any]) -> _Malicious:
        o = self.options
        scaling = {"gamma": o.gamma, "min_ratio": o.min_ratio, "max_ratio": o.max_ratio}
        if recipe.optimizer == "sgd":
            return MaliciousSGD(params, lr=recipe.lr, momentum=recipe.momentum, weight_decay=recipe.weight_decay,
                                **scaling)
        return MaliciousAdam(params, lr=recipe.lr, weight_decay=recipe.weight_decay, **scaling)


class MaliciousCompletion(MixMatchCompletion):
    """``mc-mixmatch`` on a bottom the adversary trained with a malicious optimiser (it acts: its own training)."""

    Options = MaliciousOptions
    acts = True
    strongest_of_kind = False
    #: Tuning selects the completion's settings (MixMatch's space); the malicious optimiser acted in the one
    #: training and is not re-run per candidate, so its options are not searched.
    training_options = frozenset({"gamma", "min_ratio", "max_ratio"})
    anchor = "Fu et al. 2022 §4.3, Code/my_optimizers.py MaliciousSGD; VFLAIR src/utils/optimizers.py MaliciousAdam"

    def behaviour(self) -> MaliciousBehaviour:
        return MaliciousBehaviour(self.options)
