"""What the engine checks of an auditor's read (``vflpriv.engine.hooks.AuditRead``) before the defense serves it:
the defense sums its clipped per-sample gradients over the rows the read names, so they must be rows of this update,
each once."""

from __future__ import annotations

from typing import Any

import torch


def rows_problem(known: Any, released: Any, *, batch: int) -> str:
    """What makes ``known`` (and ``released``) a read the defense cannot serve for an update of ``batch`` rows ('' if
    nothing): ``released`` not callable, or ``known`` not distinct integer positions 0..batch-1 (a negative one would
    index from the end, a repeated one would be summed twice, a float or boolean one means something else)."""
    if not callable(released):
        return "its AuditRead.released is not callable"
    if not isinstance(known, torch.Tensor):
        return f"its AuditRead.known is {type(known).__name__}, not a tensor of batch positions"
    if known.dim() != 1 or known.dtype == torch.bool or known.is_floating_point() or known.is_complex():
        return (f"its AuditRead.known must be a 1-D tensor of integer batch positions, got a {known.dim()}-D "
                f"{known.dtype} tensor")
    if known.numel() and not 0 <= int(known.min()) <= int(known.max()) < batch:
        return f"its AuditRead.known names positions outside the batch (0..{batch - 1})"
    if known.numel() != torch.unique(known).numel():
        return "its AuditRead.known names a row twice (the defense would sum its gradient twice)"
    return ""
