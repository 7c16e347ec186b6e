"""A method vflpriv must refuse: split learning whose active party also reads the passive party's raw features.

The embeddings and gradients go through the channel as split learning's do, but the top model also gets
the mean of party 1's raw features, taken straight from ``fed.parties[1]``: information that never crossed
the channel, so no defense could touch it and no attack would see it. ``vflpriv audit --check-only``
refuses it (the conformance check zeroes every payload and finds the active party's predictions still
depend on the passive features).
"""

from __future__ import annotations

import torch
from torch import nn

from vflpriv.engine import ACTIVE, EMBEDDING, FINETUNE, GRADIENT, INFERENCE, Federation, Message
from vflpriv.methods import Method, Trained
from vflpriv.models import build_encoder
from vflpriv.models.training import index_batches, make_optimizer


class LeakyTop(nn.Module):
    def __init__(self, in_dim: int, num_classes: int):
        super().__init__()
        self.linear = nn.Linear(in_dim + 1, num_classes)

    def forward(self, reps: list[torch.Tensor], side: torch.Tensor) -> torch.Tensor:
        return self.linear(torch.cat([*reps, side], dim=1))


def _side(fed: Federation, rows: torch.Tensor, split: str) -> torch.Tensor:
    x = (fed.parties[1].x_train if split == "train" else fed.parties[1].x_test)[rows]  # the side path
    return x.flatten(1).mean(1, keepdim=True)


class LeakySplit(Method):
    """Split learning whose active party also reads party 1's raw features around the channel (refused by the audit)."""

    def finetune(self, fed: Federation, pretrained) -> Trained:
        bottoms = [build_encoder(p.spec, fed.model, generator=fed.generator).to(fed.device) for p in fed.parties]
        top = LeakyTop(sum(b.out_dim for b in bottoms), fed.num_classes).to(fed.device)
        opt = make_optimizer([q for m in (*bottoms, top) for q in m.parameters()], name="adam", lr=1e-3, weight_decay=0)
        for epoch in range(fed.finetune.epochs):
            for batch in index_batches(fed.labeled_aligned(), batch_size=fed.finetune.batch_size, generator=fed.generator):
                local = [b(p.x_train[batch]) for b, p in zip(bottoms, fed.parties)]
                received = [local[ACTIVE]] + [
                    fed.channel.send(Message(EMBEDDING, FINETUNE, p.index, ACTIVE, local[p.index], batch, epoch))
                    .requires_grad_() for p in fed.passive]
                loss = nn.functional.cross_entropy(top(received, _side(fed, batch, "train")), fed.active.labels[batch])
                opt.zero_grad()
                loss.backward()
                for p in fed.passive:
                    grad = fed.channel.send(Message(GRADIENT, FINETUNE, ACTIVE, p.index, received[p.index].grad, batch, epoch))
                    local[p.index].backward(grad)
                opt.step()
        return Trained(bottoms, top)

    @torch.no_grad()
    def predict(self, fed: Federation, trained: Trained) -> torch.Tensor:
        rows = torch.arange(fed.active.x_test.shape[0], device=fed.device)
        reps = [trained.bottoms[ACTIVE](fed.active.x_test)] + [
            fed.channel.send(Message(EMBEDDING, INFERENCE, p.index, ACTIVE, trained.bottoms[p.index](p.x_test)))
            for p in fed.passive]
        return trained.top(reps, _side(fed, rows, "test"))
