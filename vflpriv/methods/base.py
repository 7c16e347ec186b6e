"""What a VFL method is: optional pretraining, then finetuning, written only against the federation."""

from __future__ import annotations

import copy
from typing import ClassVar

from pydantic import BaseModel
from torch import nn

from vflpriv.components import NoOptions
from vflpriv.engine import FINETUNE, GRADIENT, Federation
from vflpriv.methods.finetune import Trained, finetune, new_top
from vflpriv.models.encoders import build_encoder


class Method:
    """Base of registered methods.

    ``pretrain`` returns one encoder per party as each party holds it after pretraining (for
    FedHSSL: cross and local encoders pooled), or ``None`` for methods without pretraining. Its
    output is cached by the runner, so it must depend only on the federation and the options.
    ``finetune`` starts from those encoders (or fresh ones) and runs the shared split-learning loop.
    """

    Options: ClassVar[type[BaseModel]] = NoOptions
    pretrains: ClassVar[bool] = False
    #: Whether pretraining reads labels; if not, the pretraining cache ignores the label budget and aux set.
    pretrain_reads_labels: ClassVar[bool] = False
    #: (kind, phase) pairs a passive party receives; the shared split-learning loop sends gradients down.
    #: The runner refuses an attack that needs messages the method never sends to the adversary.
    passive_receives: ClassVar[frozenset[tuple[str, str]]] = frozenset({(GRADIENT, FINETUNE)})

    def __init__(self, options: BaseModel):
        self.options = options

    def pretrain(self, fed: Federation) -> list[nn.Module] | None:
        return None

    def fresh_bottoms(self, fed: Federation) -> list[nn.Module]:
        return [build_encoder(p.spec, fed.model, generator=fed.generator).to(fed.device) for p in fed.parties]

    def finetune(self, fed: Federation, pretrained: list[nn.Module] | None) -> Trained:
        bottoms = [copy.deepcopy(m) for m in pretrained] if pretrained is not None else self.fresh_bottoms(fed)
        return finetune(fed, bottoms, new_top(fed, bottoms))
