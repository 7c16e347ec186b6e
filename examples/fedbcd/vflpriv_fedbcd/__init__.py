"""FedBCD-p (Liu et al. 2022): split learning in which every exchange is followed by Q - 1 local updates.

A third-party vflpriv method with its own training loop (docs/plugins.md, "A method with its own loop").
Per batch: one exchange as in split learning (embeddings up, gradients down, every party updates); then Q - 1
local updates, in which the active party trains on its fresh representation beside the passive parties' stale
received embeddings, and each passive party re-forwards its batch and backpropagates the stale received
gradient (VFLAIR's FedBCD_p, src/evaluates/MainTaskVFL.py). The adversary receives one gradient per Q updates.
With Q = 1 it is split learning, bit for bit (the example's test checks it against ``splitnn``; and for any Q
against the shared loop's ``finetune.local_updates``, which does the same).

This file is the whole plugin: it only uses vflpriv's public method API.
"""

from __future__ import annotations

import copy

import torch
from pydantic import Field
from torch import nn

from vflpriv.config.options import Options
from vflpriv.engine import (
    ACTIVE,
    EMBEDDING,
    FINETUNE,
    GRADIENT,
    PASSIVE_OPTIMIZER,
    PASSIVE_STEP,
    Federation,
    Message,
    PassiveStep,
)
from vflpriv.methods import Method, PartyOptimizers, Trained, backward_with, new_top
from vflpriv.models.training import index_batches


class FedBCDOptions(Options):
    local_updates: int = Field(5, ge=1, description="Q: updates per exchange of embeddings and gradients; 1 = split learning")


class FedBCD(Method):
    """Split learning's traffic (the default ``sends``), Q updates per exchange."""

    Options = FedBCDOptions
    #: Its own loop: a Linear top, and both adversary hook points (so BLI can observe and mc-active act).
    supports = frozenset({"top:linear", PASSIVE_STEP, PASSIVE_OPTIMIZER})

    def label_uses(self) -> tuple[str, ...]:
        return ("its own loop reads the labels at every exchange and local update without the defenses' hook points",)

    def finetune(self, fed: Federation, pretrained: list[nn.Module] | None) -> Trained:
        bottoms = [copy.deepcopy(m) for m in pretrained] if pretrained is not None else self.fresh_bottoms(fed)
        top = new_top(fed, bottoms)
        owned = [list(b.parameters()) for b in bottoms]
        owned[ACTIVE] += list(top.parameters())  # each party steps only its own parameters
        optimizers = PartyOptimizers(fed.finetune, owned, hooks=fed.hooks)  # fed.finetune's recipe; the hook point
        for module in (*bottoms, top):
            module.train()
        for epoch in range(fed.finetune.epochs):
            optimizers.start_epoch(epoch)
            batches = index_batches(fed.labeled_aligned(), batch_size=fed.finetune.batch_size, generator=fed.generator)
            for step, batch in enumerate(batches):
                y = fed.active.labels[batch]  # the active party's own labels: read only in its code
                optimizers.zero_grad()
                stale = self.exchange(fed, bottoms, top, batch, y, epoch=epoch, step=step)
                optimizers.step()
                for _ in range(self.options.local_updates - 1):
                    optimizers.zero_grad()
                    self.local_update(fed, bottoms, top, batch, y, stale)
                    optimizers.step()
        return Trained(bottoms, top)

    @staticmethod
    def exchange(fed: Federation, bottoms: list[nn.Module], top: nn.Module, batch: torch.Tensor, y: torch.Tensor,
                 *, epoch: int, step: int) -> dict[int, tuple[torch.Tensor, torch.Tensor]]:
        """One round of split learning on ``batch``; returns each passive party's (embedding as the active party
        received it, gradient as the passive party received it) for the local updates."""
        local = [bottoms[p.index](p.x_train[batch]) for p in fed.parties]
        received = [local[ACTIVE]]
        for p in fed.passive:
            h = fed.channel.send(Message(EMBEDDING, FINETUNE, p.index, ACTIVE, local[p.index], batch, epoch))
            received.append(h.requires_grad_())  # send returns a detached tensor: a leaf of the active party's graph
        nn.functional.cross_entropy(top(received), y).backward()
        stale = {}
        for p in fed.passive:
            g = fed.channel.send(Message(GRADIENT, FINETUNE, ACTIVE, p.index, received[p.index].grad, batch, epoch))
            fed.hooks.passive_step(PassiveStep(p.index, epoch, step, batch, p.x_train[batch], bottoms[p.index],
                                               local[p.index], g))  # where an adversary observes its own step
            backward_with(local[p.index], g)  # the payload the channel delivered, never received[...].grad
            stale[p.index] = (received[p.index].detach(), g)
        return stale

    @staticmethod
    def local_update(fed: Federation, bottoms: list[nn.Module], top: nn.Module, batch: torch.Tensor, y: torch.Tensor,
                     stale: dict[int, tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Every party's update without communication: fresh own forward pass, stale received tensors."""
        reps = [bottoms[ACTIVE](fed.active.x_train[batch]), *(stale[p.index][0] for p in fed.passive)]
        nn.functional.cross_entropy(top(reps), y).backward()
        for p in fed.passive:
            backward_with(bottoms[p.index](p.x_train[batch]), stale[p.index][1])
