"""Supervised training of the active party on its own labeled local samples, and Local-A.

- ``ActiveLocalModel``: the active party's encoder h^1 and a local prediction head f (VFLHLP Eq. 4:
  L^1 = F(f(Theta^0; h^1(Theta^1; X^1)), Y)), trained on every local sample it holds a label for.
- ``LocalA`` (``local-a``): that model is the whole method (VFLHLP §5, baseline "Local-A"): the active party
  alone, no federation, so no message crosses and attacks record "not applicable" (with the prior).
  It defaults to the VFLHLP label setting (labels on all the active party's local samples), where it is
  the paper's baseline; with ``partition.active_labels_local=false`` it trains on the labeled aligned samples.

Settings (Adam, lr 1e-3, batch 64, 20 epochs) follow vflpriv's finetuning defaults: paper 001 gives none.
"""

from __future__ import annotations

import torch
from pydantic import Field
from torch import nn

from vflpriv.common.seeding import generator as seeded_generator
from vflpriv.config.options import Options
from vflpriv.engine import ACTIVE, Federation, Party
from vflpriv.methods.base import Method
from vflpriv.methods.finetune import Trained
from vflpriv.models.encoders import build_encoder, init_parameters
from vflpriv.models.training import apply_in_batches, fit_classifier


class SupervisedOptions(Options):
    """Training of the active party's local model (VFLHLP step 1, Local-A)."""

    supervised_epochs: int = Field(20, ge=1, description="epochs over the active party's labeled local samples")
    supervised_lr: float = Field(1e-3, gt=0, description="Adam learning rate")
    supervised_batch_size: int = Field(64, ge=2)
    supervised_weight_decay: float = Field(1e-5, ge=0)


class ActiveLocalModel(nn.Module):
    """h^1 followed by the local head f: the active party's model trained on its own data alone."""

    def __init__(self, encoder: nn.Module, head: nn.Linear):
        super().__init__()
        self.encoder = encoder
        self.head = head
        self.out_dim = encoder.out_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))


def untrained_local_model(party: Party, fed: Federation, *, generator: torch.Generator) -> ActiveLocalModel:
    encoder = build_encoder(party.spec, fed.model, generator=generator)
    head = init_parameters(nn.Linear(encoder.out_dim, fed.num_classes), generator=generator)
    return ActiveLocalModel(encoder, head).to(fed.device)


def train_active_local_model(fed: Federation, options: SupervisedOptions, *, stream: str) -> ActiveLocalModel:
    """The active party's local model trained with cross-entropy on every local sample it has a label for
    (``label_ids``: the labeled aligned samples, and its unaligned ones in the VFLHLP setting)."""
    seed = fed.generator.initial_seed()
    model = untrained_local_model(fed.active, fed, generator=seeded_generator(seed, f"{stream}:init"))
    ids = fed.active.label_ids
    fit_classifier(model, fed.active.x_train[ids], fed.active.labels[ids], epochs=options.supervised_epochs,
                   lr=options.supervised_lr, weight_decay=options.supervised_weight_decay,
                   batch_size=options.supervised_batch_size, generator=seeded_generator(seed, f"{stream}:batches"),
                   what="active party's local model")
    return model


class LocalA(Method):
    """Local-A: the active party's own model on its own features; a non-federated reference."""

    Options = SupervisedOptions
    sends = frozenset()
    federated = False
    supports = frozenset({"top:linear"})  # no split learning: no top, no exchange, no hook point
    default_active_labels_local = True

    def label_uses(self) -> tuple[str, ...]:
        return ("not federated: the active party fits its own model on its labels alone",)

    def finetune(self, fed: Federation, pretrained: list[nn.Module] | None) -> Trained:
        model = train_active_local_model(fed, self.options, stream="local-a")
        return Trained([model.encoder], model.head)

    def predict(self, fed: Federation, trained: Trained, *, ids: torch.Tensor | None = None) -> torch.Tensor:
        x = fed.active.x_test if ids is None else fed.active.x_train[ids]
        return apply_in_batches(nn.Sequential(trained.bottoms[ACTIVE], trained.top), x)
