"""embedding-dp's accounting (``defenses/embedding_dp.py`` holds the argument): per training row, the mechanisms it
passed (:class:`Counts`), the epsilon of their composition (:func:`gaussian_epsilon`, Opacus' RDP accountant), and
what every epsilon assumes (:data:`HOOKS_ASSUMED`)."""

from __future__ import annotations

import math

import torch

from vflpriv.defenses.dp_gaussian import _accountant_notes_off


class Counts:
    """Per training row, how many times its id was added; the ids are kept as added and folded into the totals every
    ``fold`` adds and when read (no indexed write per step in the training's hot loop, and memory bounded by ``fold``
    batches, not the training's)."""

    def __init__(self, n: int, *, fold: int = 64):
        self.total, self.pending, self.fold = torch.zeros(n, dtype=torch.long), [], fold

    def add(self, ids: torch.Tensor) -> None:
        self.pending.append(ids.clone())  # a copy: the caller may reuse its index buffer
        if len(self.pending) >= self.fold:
            self._fold()

    def counts(self) -> torch.Tensor:
        self._fold()
        return self.total

    def _fold(self) -> None:
        if self.pending:
            ids = torch.cat([i.cpu() for i in self.pending])
            self.total.index_put_((ids,), torch.ones_like(ids), accumulate=True)
            self.pending = []


def gaussian_epsilon(multiplier: float, steps: int, *, delta: float) -> float:
    """epsilon at ``delta`` of ``steps`` adaptive Gaussian mechanisms of noise multiplier ``multiplier`` (sample rate 1),
    by Opacus' RDP accountant (0 where its conversion gives a negative one); inf where the multiplier is so small that
    the accountant overflows (no finite claim)."""
    from opacus.accountants import RDPAccountant

    accountant = RDPAccountant()
    accountant.history.append((multiplier, 1.0, steps))
    with _accountant_notes_off():
        try:
            return max(0.0, float(accountant.get_epsilon(delta=delta)))  # a larger epsilon holds too
        except (ZeroDivisionError, OverflowError):  # a multiplier so small that every RDP order overflows: no bound
            return math.inf


#: What every epsilon embedding-dp records assumes and cannot check (issue 47, reviews rc3 F4, rowcheck4 R5).
HOOKS_ASSUMED = ("the feature epsilon assumes no hooks registered by other code on the victim's bottom or "
                 "embedding-dp's wrapper (torch lists hooks through no public API, and the probes see a hook only "
                 "where it mixes the batch's rows at the checked update), no change to the bottom after an input "
                 "shape's first forward, no other rows marked as the shared predict's test rows, and every feature "
                 "use declared")
