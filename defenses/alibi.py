"""ALIBI: Laplace noise on the one-hot label and Bayesian post-processing into a soft label (Malek et al., "Antipodes
of Label Differential Privacy: PATE and ALIBI", NeurIPS 2021; facebookresearch/label_dp_antipodes).

For each label the active party holds: z = onehot(y) + Lap(2 / eps) on each of the C coordinates (changing the label
moves the one-hot vector by 2 in L1, so this is the Laplace mechanism at eps: eps-label-DP), drawn once. Its
posterior under a uniform prior, P(c | z) proportional to prod_j exp(-eps / 2 |z_j - [j = c]|), is proportional to
exp(-eps / 2 (|z_c - 1| - |z_c|)) (the other coordinates cancel), and the active party trains with that probability
row as its target (a post-processing of z: still eps-label-DP); any other use of its labels reads the posterior's
argmax. Strength axis: epsilon (lower is stronger); +inf is the identity.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from vflpriv.defenses.base import LABELS, LabelDefense, StrengthAxis
from vflpriv.engine.hooks import SOFT_LABELS

if TYPE_CHECKING:
    from vflpriv.engine.party import Federation


def laplace(shape: tuple[int, ...], *, scale: float, generator: torch.Generator) -> torch.Tensor:
    """Laplace(0, scale) draws by inverting the CDF of a uniform draw from ``generator``."""
    u = torch.rand(shape, generator=generator, device=generator.device, dtype=torch.float64) - 0.5
    return -scale * u.sign() * torch.log1p(-2 * u.abs())


def posterior(noisy: torch.Tensor, *, epsilon: float) -> torch.Tensor:
    """P(class | noisy one-hot) under a uniform prior and Laplace(2 / eps) noise, one row per sample."""
    return torch.softmax(-epsilon / 2 * ((noisy - 1).abs() - noisy.abs()), dim=1)


class Alibi(LabelDefense):
    """Laplace-noised one-hot labels, turned into soft labels by their posterior (Malek et al. 2021)."""

    hook_points = frozenset({LABELS, SOFT_LABELS})
    axis = StrengthAxis(name="epsilon", stronger="lower", identity=math.inf, search=(0.05, 20.0))
    #: 8 is above what the audit's canaries can test (about 4.5 for 75 ten-class canaries); 4 is below it.
    audit_strengths = {"finetune": (4.0, 2.0, 1.0)}
    anchor = "Malek et al. 2021 (ALIBI); facebookresearch/label_dp_antipodes"

    def relabel(self, labels: torch.Tensor, *, num_classes: int) -> torch.Tensor:
        return self.soft(labels, num_classes=num_classes).argmax(1).to(labels.device)

    def soft(self, labels: torch.Tensor, *, num_classes: int) -> torch.Tensor:
        """The posterior rows of ``labels`` (drawn once from the defense's stream)."""
        onehot = torch.nn.functional.one_hot(labels.cpu(), num_classes).double()
        noisy = onehot + laplace(tuple(onehot.shape), scale=2.0 / self.strength, generator=self.generator).cpu()
        return posterior(noisy, epsilon=self.strength).float()

    def bind(self, federation: Federation) -> None:
        """The active party's known labels become the posterior's argmax, and its targets the posterior rows."""
        if self.is_identity:
            return
        active = federation.active
        known = active.labels >= 0
        rows = self.soft(active.labels[known], num_classes=federation.num_classes).to(active.labels.device)
        labels = active.labels.clone()
        labels[known] = rows.argmax(1)
        soft = torch.zeros(labels.numel(), federation.num_classes, device=labels.device)
        soft[known] = rows
        self.replace_labels(federation, labels, soft)

    @classmethod
    def claimed_epsilon(cls, strength: float, *, finetune, options: dict) -> tuple[float, float] | None:
        return None if math.isinf(strength) else (float(strength), 0.0)

    def privacy_spent(self) -> float | None:
        """epsilon: the Laplace mechanism on each one-hot label; everything after is a post-processing of it."""
        return None if self.is_identity else float(self.strength)
