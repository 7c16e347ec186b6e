"""Gaussian noise on each gradient message, the per-message mechanism of VFLAIR's ``GaussianDP``
(``src/evaluates/defenses/defense_functions.py``; vflpriv 0.1's ``dp-gaussian``): each row of a gradient message
(one sample's gradient) is clipped to L2 norm C and N(0, (sigma C)^2) is added to every entry,
G'_i = G_i / max(1, ||G_i|| / C) + N(0, sigma^2 C^2 I). VFLAIR instead scales the whole batch by its largest row norm
to 0.2 and adds noise of a fixed absolute std; per-row clipping bounds each row.

It claims no epsilon. Its accountant in 0.1 charged one sampled-Gaussian step per message, as if one label changed
one row of one message; it changes far more: the active party's top trains on the clean labels, and every later row
of every sample is computed through that top, so one label moves all later messages (VFLAIR's GaussianDP has the same
flaw). ``dp-gaussian`` is the mechanism whose epsilon holds (DP-SGD on the active party's whole label-dependent
computation). This one stays as the anchors' defense, measured like any other: by its attacks and its canaries'
empirical epsilon. Strength: the noise multiplier sigma (higher is stronger); 0 is the identity.
"""

from __future__ import annotations

import math

import torch
from pydantic import Field

from vflpriv.config.options import Options
from vflpriv.defenses.base import Defense, StrengthAxis
from vflpriv.engine.message import Message


class GaussianMessageOptions(Options):
    clip: float = Field(1.0, gt=0, description="C: every row of a protected message is clipped to this L2 norm")


def clip_rows(tensor: torch.Tensor, *, clip: float) -> torch.Tensor:
    """Each row scaled down to L2 norm at most ``clip``."""
    rows = tensor.reshape(tensor.shape[0], math.prod(tensor.shape[1:]))  # reshape(n, -1), defined for no rows too
    factor = (rows.norm(dim=1, keepdim=True) / clip).clamp_min(1.0)
    return (rows / factor).reshape(tensor.shape)


class GaussianMessage(Defense):
    """Per-row clipping to C and Gaussian noise sigma C on each gradient message (VFLAIR GaussianDP); no epsilon."""

    Options = GaussianMessageOptions
    default_kinds = ("gradient",)
    #: On embeddings (``kinds: [embedding]``, a passive party's): VFLAIR's ``GaussianDP_for_pred`` against feature
    #: inference, per row clipped; the plain-noise baseline of the feature defenses, with no claim either.
    supported_kinds = ("gradient", "embedding")
    axis = StrengthAxis(name="sigma", stronger="higher", identity=0.0, low=0.0, high=1e6, search=(0.1, 10.0), log=True)
    #: With the default C = 1 above every row's norm (rows of a batch-mean loss are ~1e-3), sigma C is an absolute
    #: noise std: gc on digits still reads every label at sigma 0.001 and none at 0.01 (0.5 to 4 were all past it).
    audit_strengths = {"finetune": (0.001, 0.01, 0.1)}
    #: On embeddings (rows of norm up to C = 1, unlike a gradient's ~1e-3): sigma 1 brings the decoder to the prior on
    #: digits (benchmarks/results/feature_defense_grid.md).
    embedding_audit_strengths = {"finetune": (0.1, 0.3, 1.0)}
    anchor = "VFLAIR GaussianDP (per-message clipping and noise)"

    def transform(self, tensor: torch.Tensor, message: Message) -> torch.Tensor:
        clip = self.options.clip
        noise = torch.randn(tensor.shape, generator=self.generator, dtype=tensor.dtype, device=self.generator.device)
        return clip_rows(tensor, clip=clip) + self.strength * clip * noise.to(tensor.device)
