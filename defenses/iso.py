"""Isotropic Gaussian noise, ISO (FedHSSL Eq. 7; Li et al. 2022; REFERENCE.md §11).

ISO(d) = d + eps, eps ~ N(0, sigma^2 I), sigma = lambda * max_i ||d_i||_2 / sqrt(m), for a message
d of b rows of m entries; sigma is recomputed for every message. For weights, rows are output units
(first dimension) and a 1-D tensor is one row (vflpriv's choice; the FedHSSL code never calls it).
Weights are parameters only: BatchNorm running statistics travel as their own kind ``statistics``,
which ISO does not support, because noise on a running variance can make it negative and the
encoder's output NaN (an attack on such an encoder would score chance: a false "protection").
"""

from __future__ import annotations

import math

import torch

from vflpriv.defenses.base import Defense
from vflpriv.defenses.rows import as_rows
from vflpriv.engine.message import Message


def iso_sigma(tensor: torch.Tensor, *, strength: float) -> torch.Tensor:
    """sigma = lambda * max row norm / sqrt(row length), as a 0-d tensor (no host sync)."""
    rows = as_rows(tensor)
    return strength * rows.norm(dim=1).max() / math.sqrt(rows.shape[1])


class IsotropicNoise(Defense):
    """ISO on embeddings, gradients or shared weights of the protecting party."""

    default_kinds = ("gradient",)
    supported_kinds = ("embedding", "gradient", "weights", "head-weights")
    #: Default kinds in the pretraining phase: what the active party exposes there (FedHSSL §VI-B): its
    #: cross-party representations and the local top encoder it uploads in PMA (kind ``weights``); the
    #: FedHSSL code's wider scope adds the projector and predictor (``kinds: [embedding, weights, head-weights]``).
    pretrain_kinds = ("embedding", "weights")
    #: FedHSSL's lambda_f of Table VII in finetuning, its lambda_p of Table VI in pretraining.
    audit_strengths = {"finetune": (1.0, 5.0, 25.0), "pretrain": (0.1, 0.4, 1.0)}
    #: On a passive party's finetuning embeddings, against the feature attacks: measured on digits, lambda 1 moves the
    #: decoder's MSE a fifth of the way to the prior at 0.01 of accuracy (benchmarks/results/feature_defense_grid.md).
    embedding_audit_strengths = {"finetune": (0.3, 1.0, 3.0)}

    @classmethod
    def default_kinds_for(cls, phase: str) -> tuple[str, ...]:
        return cls.pretrain_kinds if phase == "pretrain" else cls.default_kinds

    def transform(self, tensor: torch.Tensor, message: Message) -> torch.Tensor:
        sigma = iso_sigma(tensor, strength=self.strength)
        noise = torch.randn(tensor.shape, generator=self.generator, dtype=tensor.dtype, device=self.generator.device)
        return tensor + sigma * noise.to(tensor.device)
