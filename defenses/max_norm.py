"""Max-norm gradient perturbation (Li et al. 2022, "Label Leakage and Protection in Two-party Split
Learning", ICLR 2022; REFERENCE.md §11).

Each row g_i of a gradient message is scaled by a random scalar so that every row's *expected*
squared norm equals the batch's largest one:

    g~_i = g_i * (1 + sigma_i * xi_i),  xi_i ~ N(0, 1),  sigma_i = sqrt(max(max_j ||g_j||^2 / ||g_i||^2 - 1, 0))

so E||g~_i||^2 = ||g_i||^2 (1 + sigma_i^2) = max_j ||g_j||^2 and the norm attack loses its signal.
The strength s scales sigma_i (sigma_i -> s * sigma_i): s = 1 is Li et al.'s max-norm, s = 0 the
identity, 0 < s < 1 equalises only part of the way (E||g~_i||^2 = (1 - s^2)||g_i||^2 + s^2 max_j||g_j||^2)
and s > 1 overshoots. vflpriv adds this axis so the defense can be swept like the others.
"""

from __future__ import annotations

import torch

from vflpriv.defenses.base import Defense, StrengthAxis
from vflpriv.defenses.rows import as_rows
from vflpriv.engine.message import Message


def max_norm_sigma(rows: torch.Tensor) -> torch.Tensor:
    """sigma_i = sqrt(max(max_j ||g_j||^2 / ||g_i||^2 - 1, 0)) per row (0 for an all-zero row)."""
    sq = rows.pow(2).sum(dim=1)
    ratio = torch.where(sq > 0, sq.max() / sq.clamp_min(torch.finfo(rows.dtype).tiny), torch.ones_like(sq))
    return (ratio - 1).clamp_min(0).sqrt()


class MaxNorm(Defense):
    """Li et al.'s max-norm on the per-sample gradients the protecting party sends (strength 1 = the paper)."""

    default_kinds = ("gradient",)
    supported_kinds = ("gradient",)
    axis = StrengthAxis(name="scale", stronger="higher", identity=0.0, search=(0.01, 10.0))
    audit_strengths = {"finetune": (0.5, 1.0, 2.0)}

    def transform(self, tensor: torch.Tensor, message: Message) -> torch.Tensor:
        rows = as_rows(tensor)
        sigma = self.strength * max_norm_sigma(rows)
        xi = torch.randn(rows.shape[0], generator=self.generator, dtype=rows.dtype, device=self.generator.device)
        factor = 1 + sigma * xi.to(rows.device)
        return (rows * factor[:, None]).reshape(tensor.shape)
