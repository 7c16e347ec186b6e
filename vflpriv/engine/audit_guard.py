"""What the engine checks of an auditor's read (:class:`AuditRead`) before the defense serves it: the defense sums its
clipped per-sample gradients over the rows the read names, so they must be rows of this update, each once, none a
canary's (whose label the auditor must not read), and the read must be this update's own."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from vflpriv.common.errors import ProtocolError, class_named, type_path


@dataclass(frozen=True)
class AuditRead:
    """What an auditor reads of one private update: ``known``, the batch positions whose labels it knows (never a
    canary's), and ``released``, called once the update is released with each parameter's sum over ``known`` of the
    defense's clipped per-sample gradients (None where the losses do not reach it; ``DefensePoints.backward``): the
    part of the release the auditor subtracts, which the defense has computed, so the auditor does not again."""

    known: torch.Tensor
    released: Callable[[list[torch.Tensor | None]], None]


def rows_problem(known: Any, released: Any, *, batch: int) -> str:
    """What makes ``known`` (and ``released``) a read the defense cannot serve for an update of ``batch`` rows ('' if
    nothing): ``released`` not callable, or ``known`` not distinct integer positions 0..batch-1 (a negative one would
    index from the end, a repeated one would be summed twice, a float or boolean one means something else)."""
    if not callable(released):
        return "its AuditRead.released is not callable"
    if not isinstance(known, torch.Tensor):
        return f"its AuditRead.known is {class_named(known)}, not a tensor of batch positions"
    if known.dim() != 1 or known.dtype == torch.bool or known.is_floating_point() or known.is_complex():
        return (f"its AuditRead.known must be a 1-D tensor of integer batch positions, got a {known.dim()}-D "
                f"{known.dtype} tensor")
    if known.numel() and not 0 <= int(known.min()) <= int(known.max()) < batch:
        return f"its AuditRead.known names positions outside the batch (0..{batch - 1})"
    if known.numel() != torch.unique(known).numel():
        return "its AuditRead.known names a row twice (the defense would sum its gradient twice)"
    return ""


class ReadGuard:
    """Refuses an auditor's read (ProtocolError naming the auditor's class) that is no :class:`AuditRead`, that names a
    ``hidden`` row (the defense computes the rows' gradients from their true labels, so a canary's clipped sum would
    hand the auditor the label it is to infer), that is no read of this update's rows the defense can sum once each
    (:func:`rows_problem`), or that is the previous update's read handed back. It keeps only a weak reference to that
    read: its ``released`` closure holds an update's graph and candidate gradients, which a strong one would keep
    alive for the whole training; a read the auditor still hands back is alive, so the weak reference still names
    it."""

    def __init__(self, hidden: torch.Tensor | None):
        self.hidden = hidden
        self._last: weakref.ref | None = None

    def check(self, auditor: Any, read: Any, ids: torch.Tensor) -> None:
        """Refuse ``read``, the auditor's read of the update of the batch ``ids``, or remember it as the last one."""
        if not isinstance(read, AuditRead):
            problem = f"audit_update returned {class_named(read)}, not an AuditRead or None"
        elif self._last is not None and self._last() is read:
            problem = "it handed back its AuditRead of an earlier update (each read names its own update's rows)"
        else:
            problem = rows_problem(read.known, read.released, batch=ids.numel())
        if not problem and self.hidden is not None and bool(torch.isin(ids[read.known], self.hidden).any()):
            problem = "asked for the defense's clipped gradients of a canary's row, whose label is hidden from it"
        if problem:
            raise ProtocolError(f"auditor {type_path(type(auditor))}: {problem}")
        self._last = weakref.ref(read)
