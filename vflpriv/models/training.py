"""Small training helpers: index batches, optimisers, fitting and applying a classifier."""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from vflpriv.common.errors import DivergedError
from vflpriv.models.optim import FusedAdam, FusedSGD, Optimizer


def index_batches(ids: torch.Tensor, *, batch_size: int, generator: torch.Generator | None) -> tuple[torch.Tensor, ...]:
    """Shuffle ``ids`` (when a generator is given) and cut it into batches.

    A trailing batch of one sample is merged into the previous one: BatchNorm cannot train on it.
    """
    if generator is not None:  # drawn where the generator lives (a CPU or a CUDA stream), then moved to the ids
        ids = ids[torch.randperm(ids.numel(), generator=generator, device=generator.device).to(ids.device)]
    batches = ids.split(batch_size)
    if len(batches) > 1 and batches[-1].numel() == 1:
        batches = (*batches[:-2], torch.cat(batches[-2:]))
    return batches


def batch_count(n: int, *, batch_size: int) -> int:
    """How many batches :func:`index_batches` cuts ``n`` ids into (a trailing batch of one merged)."""
    count = -(-n // batch_size)
    return count - 1 if count > 1 and n % batch_size == 1 else count


def make_optimizer(params, *, name: str, lr: float, weight_decay: float, momentum: float = 0.9) -> Optimizer:
    """Adam, or SGD with momentum (0.9: the FedHSSL code's), on the trainable ones of parameters or param groups, with
    fused kernels (``vflpriv.models.optim``)."""
    groups = list(params)
    if not (groups and isinstance(groups[0], dict)):
        groups = [{"params": groups}]
    groups = [{**g, "params": [p for p in g["params"] if p.requires_grad]} for g in groups]
    if name == "sgd":
        return FusedSGD(groups, lr=lr, momentum=momentum, weight_decay=weight_decay)
    return FusedAdam(groups, lr=lr, weight_decay=weight_decay)


def set_cosine_lr(optimizer: Optimizer, step: int, total: int) -> None:
    """lr = base * 0.5 * (1 + cos(pi * step / total)) (``CosineAnnealingLR`` with T_max = total, stepped per
    epoch) for every param group whose ``cosine`` flag is not False; a group's base lr is its lr at the first call."""
    factor = 0.5 * (1.0 + math.cos(math.pi * step / max(total, 1)))
    for g in optimizer.param_groups:
        base = g.setdefault("base_lr", g["lr"])
        g["lr"] = base * (factor if g.get("cosine", True) else 1.0)


@torch.no_grad()
def apply_in_batches(module: nn.Module, x: torch.Tensor, *, batch_size: int = 4096) -> torch.Tensor:
    """Eval-mode forward pass over ``x`` in chunks; restores the module's train/eval mode."""
    was_training = module.training
    module.eval()
    out = torch.cat([module(chunk) for chunk in x.split(batch_size)]) if x.shape[0] else module(x)
    module.train(was_training)
    return out


def fit_classifier(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    epochs: int,
    lr: float,
    weight_decay: float,
    batch_size: int,
    generator: torch.Generator,
    optimizer: str = "adam",
    on_epoch: Callable[[int, nn.Module], None] | None = None,
    what: str = "classifier",
) -> nn.Module:
    """Train ``model`` on (x, y) with cross-entropy, calling ``on_epoch(epoch, model)`` after each epoch.

    Raises :class:`DivergedError` (naming ``what``) when the loss became non-finite: a diverged head
    predicts one class everywhere, which would read as protection rather than as a failed attack.
    """
    opt = make_optimizer(model.parameters(), name=optimizer, lr=lr, weight_decay=weight_decay)
    ids = torch.arange(x.shape[0], device=x.device)
    finite = torch.ones((), dtype=torch.bool, device=x.device)
    model.train()  # once, not per epoch: switching walks the module tree (9% of a 300-epoch head's fit on digits)
    for epoch in range(epochs):
        for batch in index_batches(ids, batch_size=batch_size, generator=generator):
            loss = nn.functional.cross_entropy(model(x[batch]), y[batch])
            finite &= torch.isfinite(loss)  # on device: no sync per step
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if on_epoch is not None:
            model.eval()
            on_epoch(epoch, model)
            model.train()
    model.eval()
    require_finite(finite, f"the {what}'s training loss")
    return model


def require_finite(values: torch.Tensor, what: str) -> torch.Tensor:
    """``values`` if every entry is finite (a bool tensor: if all True), else :class:`DivergedError`."""
    ok = values.all() if values.dtype == torch.bool else torch.isfinite(values).all()
    if not bool(ok):
        raise DivergedError(f"{what} became non-finite (training diverged); not scored")
    return values
