"""Gradient sparsification (REFERENCE.md §11; the GS defense of Fu et al. 2022, after Aji & Heafield 2017).

Within each message tensor, the entries whose magnitude lies below the q-th percentile are set to
zero: exactly floor(q/100 * n) of the n entries (the smallest in magnitude, ties broken by position),
so the stated fraction is zeroed whatever the ties. The strength is q in [0, 100]; the papers use
95-99. The threshold is recomputed for every message, over the whole tensor (as the reference code
does with ``np.percentile`` on the gradient of a batch).

``error_feedback`` (VFLAIR's ``GradientSparsification``): what a message withheld is added to the next message
to the same receiver before it is sparsified, when the two have the same shape (VFLAIR skips the residual
otherwise, e.g. at an epoch's shorter last batch), so no gradient mass is lost for good, only delayed.
"""

from __future__ import annotations

import math

import torch
from pydantic import Field

from vflpriv.common.errors import ConfigError
from vflpriv.config.options import Options
from vflpriv.defenses.base import Defense, StrengthAxis
from vflpriv.engine.message import Message


class SparsifyOptions(Options):
    error_feedback: bool = Field(False, description="carry each message's dropped entries into the next one to the same "
                                 "receiver (VFLAIR GradientSparsification)")


def sparsify(tensor: torch.Tensor, *, percentile: float) -> torch.Tensor:
    """``tensor`` with its floor(percentile/100 * numel) smallest-magnitude entries set to zero."""
    flat = tensor.reshape(-1)
    n_zero = math.floor(percentile / 100.0 * flat.numel())
    if n_zero == 0:
        return tensor
    keep = flat.abs().topk(flat.numel() - n_zero, sorted=False).indices
    out = torch.zeros_like(flat)
    out[keep] = flat[keep]
    return out.reshape(tensor.shape)


class Sparsify(Defense):
    """Zero the entries below the strength-th percentile of magnitude in each protected message."""

    default_kinds = ("gradient",)
    supported_kinds = ("embedding", "gradient", "weights", "head-weights")
    axis = StrengthAxis(name="percentile", stronger="higher", identity=0.0, low=0.0, high=100.0,
                        search=(50.0, 99.9), log=False)
    audit_strengths = {"finetune": (90.0, 95.0, 99.0), "pretrain": (90.0, 95.0, 99.0)}
    embedding_audit_strengths = {"finetune": (90.0, 95.0, 99.0)}
    Options = SparsifyOptions
    anchor = "Fu et al. 2022 (GS); Aji & Heafield 2017; VFLAIR GradientSparsification (error feedback)"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        if self.options.error_feedback and set(self.kinds) != {"gradient"}:
            raise ConfigError("sparsify's error_feedback carries gradient mass between gradient messages; "
                              "use kinds [gradient]")
        self.residual: dict[tuple[int, str], torch.Tensor] = {}

    def transform(self, tensor: torch.Tensor, message: Message) -> torch.Tensor:
        if not self.options.error_feedback:
            return sparsify(tensor, percentile=self.strength)
        key = (message.receiver, message.kind)
        carried = self.residual.get(key)
        if carried is not None and carried.shape == tensor.shape:
            tensor = tensor + carried
        sent = sparsify(tensor, percentile=self.strength)
        self.residual[key] = tensor - sent
        return sent
