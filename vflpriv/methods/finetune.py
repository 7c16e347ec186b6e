"""The shared finetuning loop: split learning with embeddings up and gradients down the channel.

Each passive party k computes h_k = f_k(x_k) and sends it (kind ``embedding``); the active party
concatenates [h_0, h_1, ..., h_{K-1}], applies the top model, and sends dL/dh_k back (kind
``gradient``); party k backpropagates the received gradient through h_k. Every party owns its optimiser.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from vflpriv.config import FinetuneConfig
from vflpriv.engine import ACTIVE, EMBEDDING, FINETUNE, GRADIENT, INFERENCE, Federation, Message
from vflpriv.models.encoders import init_parameters
from vflpriv.models.training import index_batches, make_optimizer, set_cosine_lr


class TopModel(nn.Module):
    """The active party's classifier: one Linear layer over the concatenated party representations."""

    def __init__(self, in_dims: list[int], num_classes: int):
        super().__init__()
        self.linear = nn.Linear(sum(in_dims), num_classes)

    def forward(self, representations: list[torch.Tensor]) -> torch.Tensor:
        return self.linear(torch.cat(representations, dim=1))


@dataclass
class Trained:
    """A finished VFL model: one bottom encoder per party plus the active party's top model."""

    bottoms: list[nn.Module]
    top: nn.Module


def new_top(fed: Federation, bottoms: list[nn.Module]) -> TopModel:
    top = TopModel([b.out_dim for b in bottoms], fed.num_classes).to(fed.device)
    return init_parameters(top, generator=fed.generator)


class PartyOptimizers:
    """Every party's own optimiser under the finetuning recipe (``FinetuneConfig``): the lr schedule stepped
    per epoch, and gradient-norm clipping that each party applies to its own parameters (the FedHSSL code
    clips the active and the passive models separately)."""

    def __init__(self, cfg: FinetuneConfig, owned: list[list[nn.Parameter]]):
        self.cfg = cfg
        self.owned = [ps for ps in ([p for p in params if p.requires_grad] for params in owned) if ps]
        self.optimizers = [
            make_optimizer(ps, name=cfg.optimizer, lr=cfg.lr, weight_decay=cfg.weight_decay, momentum=cfg.momentum)
            for ps in self.owned
        ]

    def start_epoch(self, epoch: int) -> None:
        if self.cfg.schedule == "cosine":
            for opt in self.optimizers:
                set_cosine_lr(opt, epoch, self.cfg.epochs)

    def zero_grad(self) -> None:
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=True)

    def step(self) -> None:
        for params, opt in zip(self.owned, self.optimizers):
            if self.cfg.grad_clip > 0:
                nn.utils.clip_grad_norm_(params, self.cfg.grad_clip, foreach=True)
            opt.step()


#: An extra term of the active party's loss, from its own parameters only (e.g. VFLHLP's constraint, Eq. 8).
Penalty = Callable[[], torch.Tensor]


def finetune(
    fed: Federation, bottoms: list[nn.Module], top: nn.Module, *, train_bottoms: bool = True,
    penalty: Penalty | None = None, first_epoch: int = 0,
) -> Trained:
    """Train on the active party's labeled aligned ids for ``fed.finetune.epochs`` epochs; ``penalty()`` is
    added to the active party's loss at every step (it must read only the active party's parameters).
    Messages carry epoch numbers from ``first_epoch`` (after a method's own earlier exchanges)."""
    owned = [list(b.parameters()) if train_bottoms else [] for b in bottoms]
    owned[ACTIVE] += list(top.parameters())
    optimizers = PartyOptimizers(fed.finetune, owned)
    for module in (*bottoms, top):
        module.train()
    labels = fed.active.labels
    ids = fed.labeled_aligned()
    for epoch in range(fed.finetune.epochs):
        optimizers.start_epoch(epoch)
        for batch in index_batches(ids, batch_size=fed.finetune.batch_size, generator=fed.generator):
            optimizers.zero_grad()
            split_step(fed, bottoms, top, batch, labels[batch], epoch=first_epoch + epoch, penalty=penalty)
            optimizers.step()
    return Trained(bottoms, top)


def split_step(
    fed: Federation, bottoms: list[nn.Module], top: nn.Module, batch: torch.Tensor, y: torch.Tensor, *, epoch: int,
    penalty: Penalty | None = None,
) -> torch.Tensor:
    """One forward/backward of split learning on ``batch``; gradients land in every party's parameters."""
    local = [bottoms[p.index](p.x_train[batch]) for p in fed.parties]
    received = [local[ACTIVE]]
    for p in fed.passive:
        h = fed.channel.send(Message(EMBEDDING, FINETUNE, p.index, ACTIVE, local[p.index], batch, epoch))
        received.append(h.requires_grad_(local[p.index].requires_grad))
    loss = nn.functional.cross_entropy(top(received), y)
    if penalty is not None:
        loss = loss + penalty()
    loss.backward()
    for p in fed.passive:
        if local[p.index].requires_grad:
            grad = fed.channel.send(Message(GRADIENT, FINETUNE, ACTIVE, p.index, received[p.index].grad, batch, epoch))
            backward_with(local[p.index], grad)
    return loss.detach()


def backward_with(output: torch.Tensor, grad: torch.Tensor) -> None:
    """``output.backward(grad)``, bit for bit (d sum(output * grad) / d output = 1 * grad), without the
    import of sympy (0.3 s per process) that ``Tensor.backward`` makes when given a gradient tensor."""
    (output * grad).sum().backward()


@torch.no_grad()
def predict(fed: Federation, trained: Trained, *, split: str = "test", batch_size: int = 4096) -> torch.Tensor:
    """Logits of the federated model on the test rows (or ``train`` rows); passive parties send embeddings."""
    for module in (*trained.bottoms, trained.top):
        module.eval()
    n = fed.active.x_test.shape[0] if split == "test" else fed.active.x_train.shape[0]
    out = []
    for batch in torch.arange(n, device=fed.device).split(batch_size):
        reps = []
        for p in fed.parties:
            x = (p.x_test if split == "test" else p.x_train)[batch]
            h = trained.bottoms[p.index](x)
            if p.index != ACTIVE:
                h = fed.channel.send(Message(EMBEDDING, INFERENCE, p.index, ACTIVE, h, None))
            reps.append(h)
        out.append(trained.top(reps))
    return torch.cat(out)
