"""What a VFL method is: optional pretraining, then finetuning, written only against the federation."""

from __future__ import annotations

import copy
from typing import ClassVar

import torch
from pydantic import BaseModel
from torch import nn

from vflpriv.engine import SPLIT_LEARNING, Federation, Traffic, passive_receives
from vflpriv.methods.finetune import Trained, finetune, new_top, predict
from vflpriv.models.encoders import build_encoder
from vflpriv.options import NoOptions


class Method:
    """Base of registered methods.

    ``pretrain`` returns one encoder per party as each party holds it after pretraining (for
    FedHSSL: cross and local encoders pooled), or ``None`` for methods without pretraining. Its
    output is cached by the runner, so it must depend only on the federation and the options.
    ``finetune`` starts from those encoders (or fresh ones) and runs the shared split-learning loop.
    The adversary's snapshot of a phase is its entry of ``pretrain``'s list (pretrain) or of
    ``Trained.bottoms`` (finetune).
    """

    Options: ClassVar[type[BaseModel]] = NoOptions
    pretrains: ClassVar[bool] = False
    #: Whether pretraining reads labels; if not, the pretraining cache ignores the label budget and aux set.
    pretrain_reads_labels: ClassVar[bool] = False
    #: Every message the method sends, as (sender role, kind, phase); the channel refuses any other, the
    #: planner refuses defenses and attacks on messages never sent (see ``vflpriv.engine.roles``).
    sends: ClassVar[Traffic] = SPLIT_LEARNING
    #: Whether parties exchange anything at all; a non-federated reference (one party alone, or all
    #: features pooled) has no adversary, so its attack records say "not applicable".
    federated: ClassVar[bool] = True
    #: The VFLHLP setting (the active party knows the labels of all its local samples) when the partition
    #: leaves ``active_labels_local`` unset; ``requires_active_labels_local`` refuses it set off.
    default_active_labels_local: ClassVar[bool] = False
    requires_active_labels_local: ClassVar[bool] = False

    def __init__(self, options: BaseModel):
        self.options = options

    @classmethod
    def passive_receives(cls) -> frozenset[tuple[str, str]]:
        """(kind, phase) pairs a passive party receives (from the active party or the server)."""
        return passive_receives(cls.sends)

    def pretrain(self, fed: Federation) -> list[nn.Module] | None:
        return None

    def fresh_bottoms(self, fed: Federation) -> list[nn.Module]:
        return [build_encoder(p.spec, fed.model, generator=fed.generator).to(fed.device) for p in fed.parties]

    def finetune(self, fed: Federation, pretrained: list[nn.Module] | None) -> Trained:
        bottoms = [copy.deepcopy(m) for m in pretrained] if pretrained is not None else self.fresh_bottoms(fed)
        return finetune(fed, bottoms, new_top(fed, bottoms))

    def predict(self, fed: Federation, trained: Trained) -> torch.Tensor:
        """Test logits of the trained model (split inference: passive parties send their embeddings)."""
        return predict(fed, trained)
