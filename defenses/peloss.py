"""PELoss: the potential energy loss (Zheng et al., "Protecting Split Learning by Potential Energy Loss", IJCAI 2024;
SecretFlow's loss defenses): the passive parties' embeddings of one class repel each other like charges of one sign,
so that training pushes them apart, towards the decision boundary, and clustering or fine-tuning a head on a few known
labels learns little from them.

The active party adds alpha * E to its loss, E = the mean over the pairs (i, j), i != j, of one batch with the same
label of 1 / (||u_i - u_j|| + ``eps``), u the received embedding scaled to the unit sphere (each party's, averaged
over the passive parties). The paper bounds the embeddings' region so that repulsion cannot simply inflate their scale;
vflpriv bounds it by measuring directions (its choice, kept as ``normalize``: false uses the raw embeddings).
Strength: alpha (higher is stronger); 0 is the identity (no term).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from pydantic import Field

from vflpriv.config.options import Options
from vflpriv.defenses.base import ACTIVE_LOSS, StrengthAxis, TrainingDefense


class PELossOptions(Options):
    eps: float = Field(1e-3, gt=0, description="added to each distance (keeps the potential of coinciding points finite)")
    normalize: bool = Field(True, description="measure distances between embeddings scaled to the unit sphere")


def potential_energy(h: torch.Tensor, y: torch.Tensor, *, eps: float, normalize: bool) -> torch.Tensor | None:
    """Mean over the same-label pairs of 1 / (distance + eps); None where the batch holds no such pair."""
    u = F.normalize(h.flatten(1), dim=1) if normalize else h.flatten(1)
    same = (y[:, None] == y[None, :]) & ~torch.eye(y.numel(), dtype=torch.bool, device=y.device)
    if not bool(same.any()):
        return None
    distance = (u[:, None, :] - u[None, :, :]).pow(2).sum(-1).clamp_min(1e-24).sqrt()
    return (1.0 / (distance + eps))[same].mean()


class PELoss(TrainingDefense):
    """alpha times the potential energy of each class's received embeddings, in the active party's loss."""

    Options = PELossOptions
    hook_points = frozenset({ACTIVE_LOSS})
    reads_labels = True
    axis = StrengthAxis(name="alpha", stronger="higher", identity=0.0, low=0.0, high=1e6, search=(0.01, 10.0), log=True)
    audit_strengths = {"finetune": (0.1, 1.0, 5.0)}
    anchor = "Zheng et al. IJCAI 2024 (potential energy loss); SecretFlow loss defenses"

    def loss_terms(self, received: dict[int, torch.Tensor], y: torch.Tensor) -> torch.Tensor | None:
        if self.is_identity or not received or y.dtype != torch.long:
            return None
        energies = [potential_energy(h, y, eps=self.options.eps, normalize=self.options.normalize)
                    for h in received.values()]
        energies = [e for e in energies if e is not None]
        return self.strength * torch.stack(energies).mean() if energies else None
