"""SSL objectives of FedHSSL Table II (Eq. 2-4) and SCARF's InfoNCE (VFLHLP Eq. 5-6).

Every loss takes the online output first and the target second and averages over the batch.
The target is detached (``st`` in the papers): no gradient reaches the encoder that produced it,
which is also what keeps gradients from crossing parties in the cross-party step.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

PairLoss = Callable[[Tensor, Tensor], Tensor]


def negative_cosine(p: Tensor, z: Tensor) -> Tensor:
    """SimSiam D(p, z) = -cos(p, st(z)), batch mean (FedHSSL Eq. 4); in [-1, 1], -1 when aligned."""
    return -F.cosine_similarity(p, z.detach(), dim=-1).mean()


def byol_loss(p: Tensor, z: Tensor) -> Tensor:
    """BYOL ||p/|p| - st(z)/|z| ||^2 = 2 - 2 cos(p, st(z)), batch mean (FedHSSL Eq. 3)."""
    return 2.0 - 2.0 * F.cosine_similarity(p, z.detach(), dim=-1).mean()


#: The smallest InfoNCE / NT-Xent temperature the methods take: unit rows' similarities / T stay within +-1000 (a
#: one-hot softmax already); far below, they overflow to inf and the loss is NaN (T = 1e-40), or ~1e19 (T = 1e-20).
MIN_TEMPERATURE = 1e-3


def info_nce(
    q: Tensor,
    k: Tensor,
    *,
    temperature: float,
    negatives: Tensor | None = None,
    stop_grad: bool = True,
) -> Tensor:
    """InfoNCE between queries ``q`` and their positive keys ``k`` (rows matched), batch mean.

    With ``negatives`` ([m, dim], unit rows, e.g. ``MemoryQueue.negatives()``) this is MoCo
    (FedHSSL Eq. 2): each query is scored against its key and the m negatives. Without, it is
    NT-Xent with in-batch negatives (VFLHLP Eq. 5-6, the cross-party MoCo step of REFERENCE §4):
    query i is scored against every key j, the matching key being the positive. Eq. 6's 1/N inside
    the log only shifts the loss by -log N and is dropped. ``q`` and ``k`` are L2-normalised here;
    ``negatives`` are used as given. ``stop_grad=False`` lets gradients reach ``k`` too (SCARF,
    where both views go through the same encoder).
    """
    q = F.normalize(q, dim=-1)
    k = F.normalize(k.detach() if stop_grad else k, dim=-1)
    if negatives is None:
        logits = q @ k.T / temperature
        target = torch.arange(q.shape[0], device=q.device)
    else:
        pos = (q * k).sum(dim=-1, keepdim=True)
        logits = torch.cat([pos, q @ negatives.detach().T], dim=1) / temperature
        target = torch.zeros(q.shape[0], dtype=torch.long, device=q.device)
    return F.cross_entropy(logits, target)


def nt_xent(own: Tensor, received: Tensor, *, temperature: float) -> Tensor:
    """NT-Xent over the 2B rows [own; received] (SimCLR; lightly's NTXentLoss without a memory bank, the
    FedHSSL code's cross-party MoCo loss): rows L2-normalised, each scored against the other 2B - 1 rows
    (own samples are negatives too), its positive the same sample in the other half; mean over all 2B rows,
    so both directions count. ``received`` is detached (no gradient crosses parties)."""
    n = own.shape[0]
    rows = torch.cat([F.normalize(own, dim=-1), F.normalize(received.detach(), dim=-1)])
    logits = (rows @ rows.T / temperature).fill_diagonal_(float("-inf"))
    ids = torch.arange(n, device=own.device)
    return F.cross_entropy(logits, torch.cat([ids + n, ids]))


def symmetrized(loss: PairLoss, p1: Tensor, z2: Tensor, p2: Tensor, z1: Tensor) -> Tensor:
    """0.5 * (loss(p1, z2) + loss(p2, z1)): the two-view swap of FedHSSL Eq. 6 (first term).

    For keyword arguments bind them first, e.g. ``functools.partial(info_nce, temperature=0.5)``.
    """
    return 0.5 * (loss(p1, z2) + loss(p2, z1))
