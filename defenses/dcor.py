"""Distance correlation between each passive embedding and the labels, added to the active party's loss (NoPeek,
Vepakomma et al. 2020; Sun et al. 2022, "Label Leakage and Protection from Forward Embedding in VFL"; SecretFlow
``DcorLoss`` in ``sfl/ml/nn/sl/defenses/loss_defense.py``; VFLAIR ``tf_distance_cov_cor``).

dCor(X, Y) = sqrt(dCov^2(X, Y) / sqrt(dVar^2(X) dVar^2(Y))) over the batch, from the double-centred matrices of
pairwise euclidean distances (Szekely et al. 2007); Y is the one-hot labels. The active party adds
lambda * sum_p dCor(z_p, Y) (``log=true``: lambda * log dCor, VFLAIR's form) to its loss, so the gradients it sends
push each passive bottom towards embeddings whose distances say little about the labels. SecretFlow's DcorLoss
uses dCov^2 / sqrt(dVar^2 dVar^2), the square of this. Strength: lambda, higher is stronger, 0 the identity;
SecretFlow's default weight 2, VFLAIR's configs 1e-4 (log) and 0.3.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from pydantic import Field

from vflpriv.config.options import Options
from vflpriv.defenses.base import ACTIVE_LOSS, StrengthAxis, TrainingDefense


class DcorOptions(Options):
    log: bool = Field(False, description="add lambda * log dCor (VFLAIR) instead of lambda * dCor (SecretFlow, NoPeek)")


def _centred_distances(x: torch.Tensor) -> torch.Tensor:
    d = torch.cdist(x, x)
    return d - d.mean(0, keepdim=True) - d.mean(1, keepdim=True) + d.mean()


def distance_correlation(x: torch.Tensor, y: torch.Tensor, *, eps: float = 1e-12) -> torch.Tensor:
    """The sample distance correlation of the rows of ``x`` and ``y`` (in [0, 1]; 0 for independence in the limit,
    1 when one is a similarity transform of the other)."""
    a, b = _centred_distances(x.flatten(1).float()), _centred_distances(y.flatten(1).float())
    dcov2 = (a * b).mean().clamp_min(0.0)
    return torch.sqrt(dcov2 / (torch.sqrt((a * a).mean() * (b * b).mean()) + eps) + eps)


class DistanceCorrelation(TrainingDefense):
    """lambda * dCor(received embedding, one-hot labels), per passive party, in the active party's loss."""

    Options = DcorOptions
    hook_points = frozenset({ACTIVE_LOSS})
    reads_labels = True
    axis = StrengthAxis(name="lambda", stronger="higher", identity=0.0, low=0.0, high=1e6, search=(0.01, 10.0), log=True)
    audit_strengths = {"finetune": (0.1, 1.0, 4.0)}
    anchor = "NoPeek (Vepakomma et al.); Sun et al. 2022; SecretFlow loss_defense.py DcorLoss; VFLAIR tf_distance_cov_cor"

    def loss_terms(self, received: dict[int, torch.Tensor], y: torch.Tensor) -> torch.Tensor | None:
        if self.is_identity or y.shape[0] < 2:
            return None
        onehot = F.one_hot(y, self.num_classes).float()
        values = [distance_correlation(h, onehot) for h in received.values()]
        if self.options.log:
            values = [v.clamp_min(1e-12).log() for v in values]
        return self.strength * torch.stack(values).sum()
