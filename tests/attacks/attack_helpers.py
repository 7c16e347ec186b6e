"""Helpers for attack tests: synthetic adversary views and a tiny XOR task (explicit generators)."""

from __future__ import annotations

import torch
from torch import nn

from vflpriv.attacks.base import AdversaryView
from vflpriv.config.registry import DATASETS
from vflpriv.data.base import PartySpec, VerticalDataset
from vflpriv.engine import FINETUNE, GRADIENT, Inbox, Received


def gradient_view(
    grads: torch.Tensor, *, labels_aux: torch.Tensor, feats_train: torch.Tensor, feats_aux: torch.Tensor,
    num_classes: int, batch_size: int = 50, epochs: int = 1, seed: int = 0,
) -> AdversaryView:
    """A view whose inbox holds ``grads`` (one row per train target, ids 0..n-1) in batches per epoch."""
    n = grads.shape[0]
    inbox = Inbox(owner=1, wanted={(GRADIENT, FINETUNE)})
    g = torch.Generator().manual_seed(seed)
    for epoch in range(epochs):
        for batch in torch.randperm(n, generator=g).split(batch_size):
            inbox.received.append(Received(GRADIENT, FINETUNE, 0, epoch, batch, grads[batch]))
    n_aux = feats_aux.shape[0]
    return AdversaryView(
        party=1, phase=FINETUNE, num_classes=num_classes, spec=PartySpec("tabular", (feats_train.shape[1],)),
        encoder=nn.Identity(), local_x=feats_train, aux_x=feats_aux, aux_y=labels_aux,
        aux_ids=torch.arange(n, n + n_aux), targets={"train": feats_train}, target_ids={"train": torch.arange(n)},
        inbox=inbox, generator=torch.Generator().manual_seed(seed), device=torch.device("cpu"),
    )


def blobs(labels: torch.Tensor, *, dim: int, spread: float, generator: torch.Generator) -> torch.Tensor:
    """Rows at one random unit-ish centre per label plus N(0, spread^2) noise."""
    centres = torch.randn(int(labels.max()) + 1, dim, generator=generator) * 3
    return centres[labels] + spread * torch.randn(labels.numel(), dim, generator=generator)


def xor_dataset(*, n_train: int = 600, n_test: int = 400, dim: int = 10, seed: int = 0) -> VerticalDataset:
    """Binary task y = [x_p0 * x_p1 > 0] of the passive features: learnable by the federation, not from
    a handful of auxiliary labels over an untrained encoder. The active party's features are noise."""
    g = torch.Generator().manual_seed(seed)

    def draw(m: int):
        xa, xp = torch.randn(m, dim, generator=g), torch.randn(m, dim, generator=g)
        return xa, xp, ((xp[:, 0] * xp[:, 1]) > 0).long()

    xa, xp, y = draw(n_train)
    ta, tp, ty = draw(n_test)
    spec = PartySpec("tabular", (dim,))
    return VerticalDataset("xor", (xa, xp), y, (ta, tp), ty, 2, (spec, spec))


def register_xor() -> str:
    """Register the XOR task under a test-only name (idempotent) and return the name."""
    DATASETS.register("test-xor", lambda **_: xor_dataset())
    return "test-xor"


def xor_config(name: str, **changes) -> dict:
    """A small run on the XOR task; ``changes`` replace top-level sections."""
    data = {
        "dataset": {"name": name},
        "partition": {"aligned_fraction": 0.6, "labeled": 300, "aux": 8},
        "model": {"hidden": 64, "out_dim": 32},
        "finetune": {"epochs": 30, "batch_size": 32},
        "attack": {"options": {"epochs": 100}, "prior": "none"},
    }
    data.update(changes)
    return data
