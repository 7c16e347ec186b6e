"""SS-VFL: self-supervised VFL (paper 003, Castiglia et al., Algorithms 1-2; REFERENCE.md §8).

Every party pretrains its encoder alone with contrastive learning on its local samples (LocalCL, Eq. 2):
MoCo as in the authors' code, temperature 0.2, EMA momentum 0.999, output dimension 128, a queue of
negatives (the SSL building blocks of ``vflpriv.methods.pretraining``; other settings as FedLocalMoCo's).

- ``ssvfl-i`` (SS-VFL-Independent, Algorithm 1): encoders frozen. Each passive party sends the
  representations of the aligned labeled samples once (one ``embedding`` message per passive party,
  through the channel) and the active party, in the server's role, trains its head on them with no
  further communication (``finetune`` epochs, lr and batch). No gradient ever goes down, so gradient
  attacks do not apply; the passive parties' one message is what ISO on embeddings protects. A passive party's
  feature defense acts at the one point this phase has, the module it releases from (``passive_bottom``:
  ``embedding-dp``'s clipped, noised rows, for the release and for inference); no passive party trains here, so the
  defenses that add to a passive loss (``nopeek``, ``mid-sender``, ``fi-adversarial``) act in its pretraining only.
- ``ssvfl-c`` (SS-VFL-Coupled, Algorithm 2): the same start, then end-to-end split learning (the shared
  finetuning loop), encoders updated.
"""

from __future__ import annotations

import copy

import torch
from pydantic import Field
from torch import nn

from vflpriv.engine import (
    ACTIVE,
    EMBEDDING,
    EPOCH_END,
    FINETUNE,
    INFERENCE,
    PASSIVE_BACKWARD,
    PASSIVE_BOTTOM,
    PASSIVE_LOSS,
    PRETRAIN_PASSIVE_LOSS,
    Federation,
    Message,
)
from vflpriv.methods.finetune import PartyOptimizers, Trained, new_top
from vflpriv.methods.local_ssl import LocalOptions, LocalSSLMethod
from vflpriv.models.ssl.losses import MIN_TEMPERATURE
from vflpriv.models.training import index_batches, require_finite


class SSVFLOptions(LocalOptions):
    """LocalCL with the SS-VFL code's MoCo settings."""

    temperature: float = Field(0.2, ge=MIN_TEMPERATURE, description="InfoNCE temperature (SS-VFL code: 0.2)")
    ema_momentum: float | None = Field(0.999, ge=0, le=1, description="key encoder momentum (SS-VFL code: 0.999)")
    projector_dim: int | None = Field(128, ge=1, description="representation dimension of the MoCo head (code: 128)")


class SSVFLCoupled(LocalSSLMethod):
    """SS-VFL-C: local MoCo pretraining, then split learning updating every encoder."""

    Options = SSVFLOptions
    flavour = "moco"


class SSVFLIndependent(SSVFLCoupled):
    """SS-VFL-I: local MoCo pretraining, frozen encoders, one round of representations, the head trained alone."""

    sends = frozenset({("passive", EMBEDDING, FINETUNE), ("passive", EMBEDDING, INFERENCE)})
    #: Its own loop: frozen encoders, the active party's Linear head trained alone; passive parties never update, and
    #: each releases from its encoder as its defenses wrap it. Its pretraining is local SSL's, with their defenses there.
    supports = frozenset({"top:linear", EPOCH_END, PASSIVE_BOTTOM, PRETRAIN_PASSIVE_LOSS})
    absent_points = dict.fromkeys(
        (PASSIVE_LOSS, PASSIVE_BACKWARD),
        "has no passive training in finetuning (frozen encoders, one release of each passive party's representations: "
        "SS-VFL Alg. 1), so no passive loss or update exists there")

    def label_uses(self) -> tuple[str, ...]:
        return ("the active party trains its head on the labels in a loop of its own (SS-VFL Alg. 1), which calls no "
                "label defense's hook point",)

    def feature_uses(self) -> tuple[str, ...]:
        """Declared beside its own finetune (read: each passive party's rows leave once, through the encoder its
        defenses wrap, with their ids; nothing else reads them), so only the pretraining's use stands."""
        return super().feature_uses()

    def finetune(self, fed: Federation, pretrained: list[nn.Module] | None) -> Trained:
        encoders = [copy.deepcopy(m).eval().requires_grad_(False) for m in pretrained]
        encoders = [e if k == ACTIVE else fed.hooks.passive_bottom(k, e) for k, e in enumerate(encoders)]
        ids = fed.labeled_aligned()
        with torch.no_grad():
            reps = [encoders[ACTIVE](fed.active.x_train[ids])]
            reps += [fed.channel.send(Message(EMBEDDING, FINETUNE, p.index, ACTIVE, encoders[p.index](p.x_train[ids]), ids))
                     for p in fed.passive]  # the single round: one message per passive party
        features = torch.cat(reps, dim=1)
        top = new_top(fed, encoders)
        cfg = fed.finetune
        optimizers = PartyOptimizers(cfg, [list(top.parameters())])
        labels = fed.active.labels[ids]
        rows = torch.arange(ids.numel(), device=fed.device)
        finite = torch.ones((), dtype=torch.bool, device=fed.device)
        for epoch in range(cfg.epochs):
            optimizers.start_epoch(epoch)
            for batch in index_batches(rows, batch_size=cfg.batch_size, generator=fed.generator):
                loss = nn.functional.cross_entropy(top.linear(features[batch]), labels[batch])
                finite &= torch.isfinite(loss)
                optimizers.zero_grad()
                loss.backward()
                optimizers.step()
            fed.epoch_end(epoch, encoders, top)
        require_finite(finite, "the active party's head training loss")
        return Trained(encoders, top)
