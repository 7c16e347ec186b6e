"""What a gradient-based attack reads: the per-sample gradients in the adversary's inbox.

In split learning the active party sends each passive party dL/dh_i for every sample i of a batch
(``vflpriv.methods.finetune.split_step``), one message per batch, with the batch's sample ids and the
epoch. These helpers turn those messages into rows aligned with the attack's targets and reduce the
several rows of one sample (one per epoch) to one: the ``first`` epoch's (the top model is barely
trained: one-shot VFL's setting, REFERENCE.md §7), the ``last`` one, or their ``mean``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from vflpriv.attacks.base import AdversaryView, Attack
from vflpriv.engine.message import GRADIENT

EpochChoice = Literal["first", "last", "mean"]


@dataclass(frozen=True)
class GradientBatch:
    """One received gradient message: its epoch, rows [b, m], global ids and positions in a target set (-1: not a target)."""

    epoch: int
    rows: torch.Tensor
    ids: torch.Tensor
    positions: torch.Tensor


def positions_in(ids: torch.Tensor, universe: torch.Tensor) -> torch.Tensor:
    """For each id, its index in ``universe`` (distinct ids), or -1 where it is absent."""
    size = int(max(ids.max(), universe.max())) + 1 if ids.numel() and universe.numel() else 1
    lookup = torch.full((size,), -1, dtype=torch.long, device=universe.device)
    lookup[universe] = torch.arange(universe.numel(), device=universe.device)
    return lookup[ids.to(universe.device)] if ids.numel() else ids.long()


def received_gradients(view: AdversaryView, *, phase: str, targets: torch.Tensor) -> list[GradientBatch]:
    """The gradient messages the adversary received in ``phase``, rows flattened, positions in ``targets``."""
    out = []
    for msg in view.inbox.select(GRADIENT, phase):
        rows = msg.payload.reshape(msg.payload.shape[0], -1).float()
        out.append(GradientBatch(msg.epoch, rows, msg.sample_ids, positions_in(msg.sample_ids, targets)))
    return out


def per_sample(batches: list[GradientBatch], *, n: int, epochs: EpochChoice) -> tuple[torch.Tensor, torch.Tensor]:
    """One row per target position (``first``/``last`` epoch it was received in, or the ``mean``), and a
    mask of the positions received at all. Rows of unreceived positions are zero."""
    rows = torch.cat([b.rows for b in batches])
    pos = torch.cat([b.positions for b in batches])
    ep = torch.cat([torch.full_like(b.positions, b.epoch) for b in batches])
    keep = pos >= 0
    rows, pos, ep = rows[keep], pos[keep], ep[keep]
    if epochs != "mean":
        reduce = "amin" if epochs == "first" else "amax"
        chosen = torch.full((n,), -1 if reduce == "amax" else torch.iinfo(torch.long).max, dtype=torch.long, device=ep.device)
        chosen = chosen.scatter_reduce(0, pos, ep, reduce=reduce)
        sel = ep == chosen[pos]
        rows, pos = rows[sel], pos[sel]
    total = torch.zeros(n, rows.shape[1], dtype=rows.dtype, device=rows.device).index_add_(0, pos, rows)
    count = torch.zeros(n, dtype=rows.dtype, device=rows.device).index_add_(0, pos, torch.ones_like(pos, dtype=rows.dtype))
    return total / count.clamp_min(1)[:, None], count > 0


class GradientAttack(Attack):
    """Base of attacks on received gradients: the runner records (and requires) those of the attacked phase."""

    kind = "gradients"

    def required_messages(self, phase: str) -> tuple[tuple[str, str], ...]:
        return ((GRADIENT, phase),)

    def batches(self, view: AdversaryView) -> list[GradientBatch]:
        """Received gradient batches of the attacked phase, positioned in the ``train`` targets."""
        return received_gradients(view, phase=view.phase, targets=view.target_ids["train"])
