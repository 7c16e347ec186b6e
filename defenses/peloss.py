"""PELoss: the potential energy loss (Zheng et al., "Protecting Split Learning by Potential Energy Loss", IJCAI 2024;
SecretFlow's loss defenses): the passive parties' embeddings of one class repel each other like charges of one sign,
so that training pushes them apart, towards the decision boundary, and clustering or fine-tuning a head on a few known
labels learns little from them.

The active party adds alpha * E to its loss, with SecretFlow's normalisation (``sfl/ml/nn/sl/defenses/
loss_defense.py`` PELoss): E = sum over the classes c of the batch of (sum over the ordered pairs i != j of class c of
1 / (||h_i - h_j|| + ``eps``)) / n_c, on the raw received embeddings h (each passive party's E, averaged over the
passive parties; SecretFlow's fuse model reads one). A batch of 64 over 10 classes sums about 54 pair terms per
alpha where a mean over pairs would take one, so alpha is on SecretFlow's scale: its default, 2, is the middle audit
strength. ``eps`` (inside the distance, where SecretFlow adds 1e-8 outside it) keeps two coinciding embeddings, e.g.
two all-zero ReLU outputs, finite. The paper bounds the embeddings' region so that repulsion cannot simply inflate
their scale; ``normalize: true`` measures distances between embeddings scaled to the unit sphere instead (vflpriv's
choice before revision 1). Strength: alpha (higher is stronger); 0 is the identity (no term).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from pydantic import Field

from vflpriv.config.options import Options
from vflpriv.defenses.base import ACTIVE_LOSS, StrengthAxis, TrainingDefense


class PELossOptions(Options):
    eps: float = Field(1e-3, gt=0, description="added to each distance (keeps the potential of coinciding points finite)")
    normalize: bool = Field(False, description="measure distances between embeddings scaled to the unit sphere (false: "
                                               "the raw embeddings, as SecretFlow)")


def potential_energy(h: torch.Tensor, y: torch.Tensor, *, eps: float, normalize: bool) -> torch.Tensor | None:
    """SecretFlow's energy: sum over the classes of (sum over the class's ordered pairs of 1 / (distance + eps)) over
    the class's count; None where the batch holds no two samples of one class."""
    u = F.normalize(h.flatten(1), dim=1) if normalize else h.flatten(1)
    same = (y[:, None] == y[None, :]) & ~torch.eye(y.numel(), dtype=torch.bool, device=y.device)
    if not bool(same.any()):
        return None
    distance = (u[:, None, :] - u[None, :, :]).pow(2).sum(-1).clamp_min(1e-24).sqrt()
    counts = same.sum(1, keepdim=True) + 1  # n_c of each row's class
    return (torch.where(same, 1.0 / (distance + eps), 0.0) / counts).sum()


class PELoss(TrainingDefense):
    """alpha times the potential energy of each class's received embeddings, in the active party's loss."""

    Options = PELossOptions
    hook_points = frozenset({ACTIVE_LOSS})
    reads_labels = True
    axis = StrengthAxis(name="alpha", stronger="higher", identity=0.0, low=0.0, high=1e6, search=(0.01, 10.0), log=True)
    audit_strengths = {"finetune": (0.5, 2.0, 8.0)}
    anchor = "Zheng et al. IJCAI 2024 (potential energy loss); SecretFlow loss defenses (PELoss, alpha 2)"
    #: 1: SecretFlow's sum per class on the raw embeddings (0: a mean over same-class pairs on the unit sphere, about
    #: 54x smaller at batch 64 and 10 classes; its records do not resume).
    revision = 1

    def loss_terms(self, received: dict[int, torch.Tensor], y: torch.Tensor) -> torch.Tensor | None:
        if self.is_identity or not received or y.dtype != torch.long:
            return None
        energies = [potential_energy(h, y, eps=self.options.eps, normalize=self.options.normalize)
                    for h in received.values()]
        energies = [e for e in energies if e is not None]
        return self.strength * torch.stack(energies).mean() if energies else None
