"""embedding-dp's wrapper of the victim's bottom (:class:`PrivateRows`): each sent row clipped to C with N(0, sigma^2 C^2)
noise, the BatchNorm statistics frozen, the tape its DP-SGD update reads, and the checks due once a training
(``defenses/embedding_dp.py`` holds the argument; ``row_checks``, ``tape_checks`` the checks)."""

from __future__ import annotations

import contextlib

import torch
from torch import nn
from torch.nn.parameter import is_lazy

from vflpriv.common.errors import ProtocolError
from vflpriv.defenses.gaussian_message import clip_rows
from vflpriv.defenses.own_modules import calls_checked, foreign_tensors
from vflpriv.defenses.per_sample import GhostTape, ghost_applies
from vflpriv.defenses.row_checks import computes_in_place

#: torch's BatchNorm layers, by their public classes (the lazy ones before their first forward).
_BATCHNORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm, nn.LazyBatchNorm1d,
               nn.LazyBatchNorm2d, nn.LazyBatchNorm3d)


class PrivateRows(nn.Module):
    """The bottom followed by per-row clipping to C and N(0, sigma^2 C^2) noise; with ``frozen``, its BatchNorm layers
    stay on their running statistics in every mode (rows computed independently). A 16-bit bottom's rows are clipped
    and noised in float32, then rounded back (post-processing): noise added in 16 bits lands on a grid that depends on
    the signal (Mironov 2012), so one release told row 0 from row 0.5 with probability 2e-4, above delta."""

    def __init__(self, bottom: nn.Module, *, clip: float, sigma: float, frozen: bool, generator: torch.Generator):
        super().__init__()
        self.bottom, self.clip, self.sigma, self.frozen, self.generator = bottom, clip, sigma, frozen, generator
        self.out_dim = getattr(bottom, "out_dim", None)
        self.taped: tuple[torch.Tensor, torch.Tensor, GhostTape] | None = None
        self.given: tuple[torch.Tensor, torch.Tensor] | None = None  # (rows sent, the input they were computed from)
        self.tape: GhostTape | None = None
        self.checked = False  # whether an update since the last train() checked that the rows are the samples' own
        self.foreign, self.rows_checked, self.sent = "", False, False  # per bottom: embedding-dp's findings, kept
        self.misread = ""  # the first layer call off its row-wise rule, or tensor subclass, seen (no claim then), or ''
        self.seed = generator.initial_seed()  # the run's (its stream's seed): the checks' probes, no draw moved
        self.train(bottom.training)

    def train(self, mode: bool = True) -> PrivateRows:
        """Set the mode (BatchNorm frozen in every mode with ``frozen``); with ``frozen``, a bottom that ghost clipping
        covers gets the tape its training forwards are recorded on; one computing in place gets copies of its batches
        (torch.func's update reads the caller's batch again); each input shape's first forward checks the layers' calls
        again (``own_modules.calls_checked``)."""
        super().train(mode)
        if self.frozen:
            for m in self.bottom.modules():
                if isinstance(m, _BATCHNORMS):
                    m.eval()
        self.tape = GhostTape(self.bottom) if self.frozen and ghost_applies(self.bottom) else None
        self.checked, self.copies, self.forwarded = False, computes_in_place(self.bottom), False
        self.shapes: set = set()  # the input shapes whose layer calls were checked since this train() / eval()
        return self

    def check_due(self, x: torch.Tensor) -> bool:
        """Whether this update, of the batch ``x``, checks that the rows are the samples' own: the first after each
        ``train()`` (the tape rebuilt; vflpriv's loop calls it once a training) whose rows are not all equal (one row,
        or n equal ones, has no other value to compare with: every probe would be the batch, so the check waits for
        the next update). Its cost: benchmarks/embedding_dp_parts.py --check."""
        if self.checked:
            return False
        flat = x.reshape(x.shape[0], -1)
        differs = (flat != flat[:1]) & ~(flat.isnan() & flat[:1].isnan())  # NaN equals NaN here, as torch.unique has it
        due = x.shape[0] >= 2 and bool(differs.any())
        self.checked = due
        return due

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.sent = True
        given = x  # what a pre-hook on this wrapper left of the caller's batch: compared at the update (input_of)
        odd = foreign_tensors(self.bottom, x)  # a tensor subclass mixes rows in no layer call: no claim at all
        if odd:
            self._misread(odd)
        tape, x = self.tape if self.training and torch.is_grad_enabled() else None, x.clone() if self.copies else x
        first = self.training and self.frozen and not self.forwarded  # DP-SGD's first training forward since train()
        before = [(k, p.detach().clone()) for k, p in self.bottom.named_parameters() if not is_lazy(p)] if first else []
        if tape is not None:  # DP-SGD's norms will come from this forward's layer inputs (defenses/per_sample.py)
            tape.keep = not self.checked  # the checked update's forward keeps copies of them (GhostTape._rewritten)
        new_shape = (x.shape, x.dtype) not in self.shapes  # the calls' shapes follow the input's for admitted layers
        self.shapes.add((x.shape, x.dtype))
        with calls_checked(self.bottom, x.shape[0], self._misread) if new_shape else contextlib.nullcontext(), \
                tape if tape else contextlib.nullcontext():
            raw = self.bottom(x)
        h = clip_rows(raw if raw.dtype.itemsize >= 4 else raw.float(), clip=self.clip)  # float32 at least
        if first:  # a data-dependent initialisation (Glow's ActNorm) writes the batch into the weights before any check
            self.forwarded = True
            changed = [k for k, v in before if not torch.equal(v, self.bottom.get_parameter(k))]
            if changed:
                raise ProtocolError(f"embedding-dp: the victim's bottom changed its parameters ({', '.join(changed)}) "
                                    "in its first training forward (a data-dependent initialisation): they would carry "
                                    "that batch's features outside DP-SGD; the run fails, no epsilon is recorded")
        noise = torch.randn(h.shape, generator=self.generator, dtype=h.dtype, device=self.generator.device)
        out = (h + self.sigma * self.clip * noise.to(h.device)).to(raw.dtype)  # a 16-bit bottom's: post-processing
        self.taped = None if tape is None else (out, h, tape)
        self.given = (out, given) if self.training and torch.is_grad_enabled() else None
        return out

    def _misread(self, why: str) -> None:
        """Keep the first call of an admitted layer off its row-wise rule (``own_modules.calls_checked``)."""
        self.misread = self.misread or why

    def __getstate__(self) -> dict:
        """Copied or pickled without the last forward's tape (an adversary's snapshot between the forward and the
        update: the taped rows are a non-leaf tensor, which cannot be deep-copied); a copy tapes after ``train()``."""
        return {**self.__dict__, "taped": None, "tape": None, "given": None, "checked": False}

    def input_of(self, sent: torch.Tensor) -> torch.Tensor | None:
        """The input this wrapper's forward received for the rows ``sent`` (after any pre-hook on it), or None for
        rows of another forward."""
        given = getattr(self, "given", None)
        return given[1] if given is not None and given[0] is sent else None

    def tape_of(self, sent: torch.Tensor) -> tuple[torch.Tensor, GhostTape] | None:
        """(the clipped rows, the tape) of the forward that returned ``sent``, once; None for another tensor."""
        taped, self.taped = self.taped, None
        return taped[1:] if taped is not None and taped[0] is sent else None


def same_rows(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two batches hold the same values (NaN where the other has NaN)."""
    if torch.equal(a, b):  # the common case, cheapest
        return True
    return a.shape == b.shape and a.dtype == b.dtype and bool(((a == b) | (a != a) & (b != b)).all())


def same_tensors(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    """Whether two lists hold the same tensors (identity, in order)."""
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))
