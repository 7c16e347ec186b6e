"""Mixup at the label party (SecretFlow ``sfl/ml/nn/sl/defenses/mixup.py``; Zhang et al. 2018, "mixup").

The active party mixes its own inputs of a batch, x' = lam x + (1 - lam) x[perm], and its loss,
lam L(pred, y) + (1 - lam) L(pred, y[perm]) (one cross-entropy against the mixed one-hot targets: it is linear in
the target), so every gradient row it sends mixes two samples' label signals. perm is the same permutation at
every batch of a size (SecretFlow: ``torch.manual_seed(perm_seed); randperm(batch)``; here from its own seeded
generator). The passive parties' inputs are not mixed: they are not the active party's. Strength: lam, lower
protects more down to 0.5 (the two labels weigh equally); 1 is the identity. SecretFlow's default 0.6 and grid
{0.4, 0.6}. Only for inputs that can be mixed: refused for an active party with categorical fields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from pydantic import Field

from vflpriv.common.seeding import generator as seeded_generator
from vflpriv.config.options import Options
from vflpriv.defenses.base import ACTIVE_BATCH, StrengthAxis, TrainingDefense
from vflpriv.engine.message import ACTIVE

if TYPE_CHECKING:
    from vflpriv.data.base import VerticalDataset


class MixupOptions(Options):
    perm_seed: int = Field(42, ge=0, description="seed of the fixed permutation (SecretFlow: 42)")


class Mixup(TrainingDefense):
    """The active party's inputs and targets of a batch mixed with a fixed permutation of the batch."""

    Options = MixupOptions
    hook_points = frozenset({ACTIVE_BATCH})
    reads_labels = True
    axis = StrengthAxis(name="lam", stronger="lower", identity=1.0, low=0.0, high=1.0, search=(0.5, 0.99), log=False)
    audit_strengths = {"finetune": (0.9, 0.75, 0.6)}
    anchor = "SecretFlow mixup.py (Mixuplayer, Mixuploss); Zhang et al. 2018"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.perms: dict[int, torch.Tensor] = {}

    @classmethod
    def incompatible(cls, *, dataset: VerticalDataset) -> str:
        if dataset.specs[ACTIVE].n_categorical:
            return "it mixes the active party's inputs, and its categorical fields cannot be mixed"
        return ""

    def permutation(self, size: int, device: torch.device) -> torch.Tensor:
        if size not in self.perms:
            g = seeded_generator(self.options.perm_seed, f"mixup:{size}")
            self.perms[size] = torch.randperm(size, generator=g, device=g.device).to(device)
        return self.perms[size]

    def active_batch(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.is_identity:
            return x, y
        lam, perm = self.strength, self.permutation(x.shape[0], x.device)
        targets = y if y.is_floating_point() else F.one_hot(y, self.num_classes).to(x.dtype)
        return lam * x + (1 - lam) * x[perm], lam * targets + (1 - lam) * targets[perm]
