"""How a message defense sees a message: as rows (per-sample rows of a batch, output units of a weight)."""

from __future__ import annotations

import torch


def as_rows(tensor: torch.Tensor) -> torch.Tensor:
    """View a message as rows: per-sample rows for batched tensors, output units for weights, one row for 1-D."""
    return tensor.reshape(1, -1) if tensor.dim() <= 1 else tensor.reshape(tensor.shape[0], -1)
