"""NoPeek at the passive party: lambda * dCor(x_b, h_b), the distance correlation between the victim's raw features of
a batch and the embedding it sends, added to the victim's own loss (Vepakomma et al. 2020, "NoPeek: Information leakage
reduction to share activations in distributed deep learning"; VFLAIR ``src/party/party.py`` passive branch with
``src/utils/basic_functions.py`` ``tf_distance_cov_cor``; ResSFL's ``nopeek`` baseline ``dist_corr(x, z)``;
../shared/ANCHORS-FEATURES.md D3).

dCor is :func:`vflpriv.defenses.dcor.distance_correlation` (the label-side ``dcor``'s, Szekely et al. 2007: double-
centred pairwise Euclidean distances over the batch), applied to (flattened x_b, h_b) instead of (h_b, labels). The
gradient of the term is added to the gradient the active party sent back (VFLAIR: "added to the gradient
back-propagated from the active party"); ``log=true`` is VFLAIR's lambda * log dCor, the default ResSFL's and the
paper's lambda * dCor. Strength: lambda, higher is stronger, 0 the identity (no term). In pretraining (resistance
transfer) the term is between each view of the batch and its encoder output, beside the SSL loss; nothing reads a
label. Grids: VFLAIR 1e-4 to 0.3 (log form), ResSFL {1, 1.5, 2}.
"""

from __future__ import annotations

import torch
from pydantic import Field

from vflpriv.config.options import Options
from vflpriv.defenses.base import StrengthAxis
from vflpriv.defenses.dcor import distance_correlation
from vflpriv.defenses.passive import PASSIVE_LOSS, PassiveDefense
from vflpriv.engine.message import FINETUNE, PRETRAIN


class NoPeekOptions(Options):
    log: bool = Field(False, description="add lambda * log dCor (VFLAIR) instead of lambda * dCor (NoPeek, ResSFL)")


class NoPeek(PassiveDefense):
    """lambda * dCor(features, sent embedding) in the passive party's own loss (finetuning, and pretraining)."""

    Options = NoPeekOptions
    hook_points = frozenset({PASSIVE_LOSS})
    phases = (FINETUNE, PRETRAIN)
    axis = StrengthAxis(name="lambda", stronger="higher", identity=0.0, low=0.0, high=1e6, search=(0.01, 10.0), log=True)
    audit_strengths = {"finetune": (0.5, 2.0, 8.0), "pretrain": (0.5, 2.0, 8.0)}
    anchor = "Vepakomma et al. 2020 (NoPeek); VFLAIR party.py + tf_distance_cov_cor on (x_b, h_b); ResSFL nopeek"
    cost = ("two B x B distance matrices per update (O(B^2) in the batch size B); the training x1.48 on digits, "
            "x1.01 with Fashion-MNIST's CNN bottom, pretraining x1.14 to x1.20 "
            "(benchmarks/results/feature_defense_overhead.md)")
    pays = ("digits: fi-decoder at the prior at lambda 8 (accuracy 0.871 of 0.937); plain noise on the embeddings gets "
            "there at 0.909 and dominates it at every matched utility (benchmarks/results/feature_defense_claims)")

    def passive_loss(self, party: int, phase: str, x: torch.Tensor, sent: torch.Tensor) -> torch.Tensor | None:
        if not self.acts_for(party, phase) or x.shape[0] < 2:
            return None
        value = distance_correlation(x, sent)
        if self.options.log:
            value = value.clamp_min(1e-12).log()
        return self.strength * value
