"""The shared finetuning loop: split learning with embeddings up and gradients down the channel.

Each passive party k computes h_k = f_k(x_k) and sends it (kind ``embedding``); the active party applies its
top model to [h_0, h_1, ..., h_{K-1}] and sends back dL/dh_k (kind ``gradient``); party k backpropagates the
received gradient through h_k. Every party owns its optimiser. The top follows ``finetune.top`` (a Linear or
an MLP over the concatenation, or the sum of per-party class logits: :func:`split_model`); with
``finetune.local_updates`` Q > 1 every exchange is followed by Q - 1 local updates on the stale received
tensors (FedBCD-p, Liu et al. 2022; VFLAIR's FedBCD_p). The loop calls the adversary's hook points
(``vflpriv.engine.hooks``): ``passive_step`` before a passive party applies a received gradient,
``passive_optimizer`` for each passive party's optimiser, and the measurement point ``fed.epoch_end`` after each
epoch; and the passive parties' defense points: ``passive_bottom`` once (the module each sends from),
``passive_loss`` and ``passive_backward`` at each update it makes from a received gradient.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from vflpriv.config.schema import FinetuneConfig
from vflpriv.engine import (
    ACTIVE,
    ActiveUpdate,
    EMBEDDING,
    FINETUNE,
    GRADIENT,
    INFERENCE,
    Federation,
    Message,
    PassiveStep,
    TrainingHooks,
)
from vflpriv.models.batchnorm import recalibrate_batchnorm
from vflpriv.models.encoders import init_parameters
from vflpriv.models.training import index_batches, make_optimizer, set_cosine_lr


class TopModel(nn.Module):
    """The active party's classifier: one Linear layer over the concatenated party representations."""

    def __init__(self, in_dims: list[int], num_classes: int):
        super().__init__()
        self.linear = nn.Linear(sum(in_dims), num_classes)

    def forward(self, representations: list[torch.Tensor]) -> torch.Tensor:
        return self.linear(torch.cat(representations, dim=1))


class MLPTop(nn.Module):
    """A deeper top over the concatenated representations: ``depth`` Linear -> ReLU layers, then a Linear (depth 1:
    VFLAIR's two-layer heads, ``finetune.top=mlp``; ``finetune.top_depth``)."""

    def __init__(self, in_dims: list[int], num_classes: int, *, hidden: int, depth: int = 1):
        super().__init__()
        widths = [sum(in_dims), *([hidden] * depth)]
        layers: list[nn.Module] = []
        for a, b in zip(widths, widths[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.layers = nn.Sequential(*layers, nn.Linear(widths[-1], num_classes))

    def forward(self, representations: list[torch.Tensor]) -> torch.Tensor:
        return self.layers(torch.cat(representations, dim=1))


class SumOfLogits(nn.Module):
    """aggVFL's top: the sum of the parties' class logits; no parameters, so the active party trains only its own
    bottom, and the gradient a passive party receives is softmax(sum) - onehot(y) (over the batch size)."""

    def forward(self, logits: list[torch.Tensor]) -> torch.Tensor:
        return torch.stack(logits).sum(0)


class WithLogits(nn.Sequential):
    """A party's bottom ending in a class-logit layer (aggVFL): encoder -> Linear(out_dim, classes)."""

    def __init__(self, encoder: nn.Module, num_classes: int):
        super().__init__(encoder, nn.Linear(encoder.out_dim, num_classes))
        self.out_dim = num_classes


@dataclass
class Trained:
    """A finished VFL model: one bottom encoder per party plus the active party's top model."""

    bottoms: list[nn.Module]
    top: nn.Module


def new_top(fed: Federation, bottoms: list[nn.Module]) -> TopModel:
    """The Linear top over ``bottoms``' outputs, drawn from ``fed.generator`` (methods whose own classifier is
    a Linear layer use it whatever ``finetune.top`` says; the shared loop uses :func:`split_model`)."""
    top = TopModel([b.out_dim for b in bottoms], fed.num_classes).to(fed.device)
    return init_parameters(top, generator=fed.generator)


def split_model(fed: Federation, encoders: list[nn.Module]) -> tuple[list[nn.Module], nn.Module]:
    """The bottoms and the active party's top under ``fed.finetune.top``: the encoders under a Linear or MLP top,
    or, for ``sum``, each encoder followed by its own class-logit layer (the bottom a party trains and the
    adversary's snapshot) under the parameter-free sum. Parameters are drawn from ``fed.generator``."""
    kind, depth = fed.finetune.top, fed.finetune.top_depth
    if kind == "linear" and depth == 0:
        return encoders, new_top(fed, encoders)
    if kind in ("linear", "mlp"):
        top = MLPTop([e.out_dim for e in encoders], fed.num_classes, hidden=fed.model.hidden, depth=depth or 1)
        return encoders, init_parameters(top, generator=fed.generator).to(fed.device)
    bottoms = [init_parameters(WithLogits(e, fed.num_classes), generator=fed.generator).to(fed.device) for e in encoders]
    return bottoms, SumOfLogits().to(fed.device)


class PartyOptimizers:
    """Every party's own optimiser under the finetuning recipe (``FinetuneConfig``): the lr schedule stepped
    per epoch, and gradient-norm clipping that each party applies to its own parameters (the FedHSSL code
    clips the active and the passive models separately). ``owned[k]`` lists party k's parameters; a passive
    party's optimiser comes through the ``passive_optimizer`` hook point (the adversary may replace its own)."""

    def __init__(self, cfg: FinetuneConfig, owned: list[list[nn.Parameter]], *, hooks: TrainingHooks | None = None):
        self.cfg = cfg
        self.hooks = hooks or TrainingHooks()
        parties = [(k, [p for p in params if p.requires_grad]) for k, params in enumerate(owned)]
        self.owned = [params for _, params in parties if params]
        self.optimizers = [self._optimizer(k, params, self.hooks) for k, params in parties if params]
        self.active = next((i for i, (k, params) in enumerate((k, ps) for k, ps in parties if ps) if k == ACTIVE), None)
        self.adopted: set[nn.Parameter] = set()

    def _optimizer(self, party: int, params: list[nn.Parameter], hooks: TrainingHooks):
        cfg = self.cfg

        def make():
            return make_optimizer(params, name=cfg.optimizer, lr=cfg.lr, weight_decay=cfg.weight_decay,
                                  momentum=cfg.momentum)

        return make() if party == ACTIVE else hooks.passive_optimizer(party, params, cfg, make)

    def start_epoch(self, epoch: int) -> None:
        if self.cfg.schedule == "cosine":
            for opt in self.optimizers:
                set_cosine_lr(opt, epoch, self.cfg.epochs)

    def zero_grad(self) -> None:
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=True)

    def adopt(self) -> None:
        """Give the active party's optimiser the parameters its defenses created since (MID's bottleneck is built
        at the first embedding it receives, when its width is known). A passive party's defenses wrap its bottom
        before its optimiser is made (``passive_bottom``), so their parameters are among its own."""
        if self.active is None:
            return
        new = [p for p in self.hooks.active_parameters() if p not in self.adopted]
        if new:
            self.optimizers[self.active].add_param_group({"params": new})
            self.owned[self.active] = self.owned[self.active] + new
            self.adopted.update(new)

    def step(self) -> None:
        self.adopt()
        for params, opt in zip(self.owned, self.optimizers):
            if self.cfg.grad_clip > 0:
                nn.utils.clip_grad_norm_(params, self.cfg.grad_clip, foreach=True)
            opt.step()


#: An extra term of the active party's loss, from its own parameters only (e.g. VFLHLP's constraint, Eq. 8).
Penalty = Callable[[], torch.Tensor]


@dataclass
class Exchange:
    """One round of split learning on a batch: the loss, and per passive party the embedding as the active party
    received it and the gradient as the passive party received it (the stale tensors of FedBCD's local updates)."""

    loss: torch.Tensor
    received: dict[int, torch.Tensor]
    gradients: dict[int, torch.Tensor]


def finetune(
    fed: Federation, bottoms: list[nn.Module], top: nn.Module, *, train_bottoms: bool = True,
    penalty: Penalty | None = None, first_epoch: int = 0, wrapped: bool = False,
) -> Trained:
    """Train on the active party's labeled aligned ids for ``fed.finetune.epochs`` epochs; ``penalty()`` is
    added to the active party's loss at every update (it must read only the active party's parameters).
    Messages carry epoch numbers from ``first_epoch`` (after a method's own earlier exchanges). Each exchange
    is followed by ``fed.finetune.local_updates - 1`` local updates (FedBCD). Each passive party trains, sends
    from and returns its bottom as its defenses wrap it (``passive_bottom``; ``wrapped``: they already do, wrapped by
    the method's own earlier exchanges, as one-shot VFL's)."""
    bottoms = [b if k == ACTIVE or wrapped else fed.hooks.passive_bottom(k, b) for k, b in enumerate(bottoms)]
    owned = [list(b.parameters()) if train_bottoms else [] for b in bottoms]
    owned[ACTIVE] += list(top.parameters())
    optimizers = PartyOptimizers(fed.finetune, owned, hooks=fed.hooks)
    for module in (*bottoms, top):
        module.train()
    labels = fed.active.labels
    ids = fed.labeled_aligned()
    for epoch in range(fed.finetune.epochs):
        optimizers.start_epoch(epoch)
        batches = index_batches(ids, batch_size=fed.finetune.batch_size, generator=fed.generator)
        for step, batch in enumerate(batches):
            optimizers.zero_grad()
            exchange = split_step(fed, bottoms, top, batch, labels[batch], epoch=first_epoch + epoch, step=step,
                                  penalty=penalty)
            optimizers.step()
            for _ in range(fed.finetune.local_updates - 1):
                optimizers.zero_grad()
                local_update(fed, bottoms, top, batch, labels[batch], exchange, penalty=penalty)
                optimizers.step()
        fed.epoch_end(first_epoch + epoch, bottoms, top)
    if fed.finetune.bn_recalibrate:
        recalibrate_bottoms(fed, bottoms)
    return Trained(bottoms, top)


def recalibrate_bottoms(fed: Federation, bottoms: list[nn.Module]) -> None:
    """``finetune.bn_recalibrate``: each party re-estimates its bottom's BatchNorm statistics on its own local
    training rows (aligned and unaligned, never test rows; no labels, nothing sent). The active party's top keeps
    its own: re-estimating it would need every party's embeddings, i.e. messages."""
    for p, bottom in zip(fed.parties, bottoms):
        recalibrate_batchnorm(bottom, p.x_train[p.local_ids], batch_size=fed.finetune.batch_size)


def split_step(
    fed: Federation, bottoms: list[nn.Module], top: nn.Module, batch: torch.Tensor, y: torch.Tensor, *, epoch: int,
    step: int = 0, penalty: Penalty | None = None,
) -> Exchange:
    """One forward/backward of split learning on ``batch``; gradients land in every party's parameters. The hook
    points (``vflpriv.engine.hooks``) are called in order: the active party's batch, each received embedding in
    its model, its loss terms, the gradient it sends; each passive party's step before it applies its gradient."""
    hooks = fed.hooks
    x_active, targets = hooks.active_batch(fed.active.x_train[batch], first_targets(fed, batch, y))
    local = [bottoms[p.index](x_active if p.index == ACTIVE else p.x_train[batch]) for p in fed.parties]
    local = hooks.audit_embeddings(batch, local, top)
    received = [local[ACTIVE]]
    for p in fed.passive:
        h = fed.channel.send(Message(EMBEDDING, FINETUNE, p.index, ACTIVE, local[p.index], batch, epoch))
        received.append(h.requires_grad_(local[p.index].requires_grad))
    logits = top([received[ACTIVE], *(hooks.receive(p.index, received[p.index]) for p in fed.passive)])
    targets = hooks.soft_targets(logits, targets, batch)
    per_class = hooks.needs_per_class()
    if hooks.backpropagates():  # per-sample clipping and noise (DP-SGD): the defense backpropagates
        leaves = {p.index: received[p.index] for p in fed.passive if received[p.index].requires_grad}
        loss = private_backward(fed, bottoms[ACTIVE], top, logits, targets, leaves, batch, penalty)
    else:
        loss = active_loss(fed, logits, targets, {p.index: received[p.index] for p in fed.passive}, y, penalty)
        loss.backward(retain_graph=per_class)
    gradients = {}
    for p in fed.passive:
        if local[p.index].requires_grad:
            leaf = received[p.index]
            sent = hooks.sent_gradient(p.index, leaf.grad, lambda c, leaf=leaf: torch.autograd.grad(
                nn.functional.cross_entropy(logits, torch.full_like(y, c)), leaf, retain_graph=True)[0])
            grad = fed.channel.send(Message(GRADIENT, FINETUNE, ACTIVE, p.index, sent, batch, epoch))
            fed.hooks.passive_step(PassiveStep(p.index, epoch, step, batch, p.x_train[batch], bottoms[p.index],
                                               local[p.index], grad))
            passive_update(fed, p.index, bottoms[p.index], p.x_train[batch], local[p.index], grad, batch)
            gradients[p.index] = grad
    return Exchange(loss.detach(), {p.index: received[p.index].detach() for p in fed.passive}, gradients)


def first_targets(fed: Federation, batch: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The active party's targets of ``batch`` before its batch defenses: its soft labels where a label defense set
    them (``SOFT_LABELS``), else its labels ``y``."""
    soft = fed.active.soft_labels
    return y if soft is None else soft[batch]


def active_loss(fed: Federation, logits: torch.Tensor, targets: torch.Tensor, received: dict[int, torch.Tensor],
                y: torch.Tensor, penalty: Penalty | None) -> torch.Tensor:
    """The active party's loss: cross-entropy on its targets (class indices, or probability rows), the defenses'
    loss terms, and a method's penalty."""
    loss = nn.functional.cross_entropy(logits, targets)
    terms = fed.hooks.loss_terms(received, y)
    if terms is not None:
        loss = loss + terms
    if penalty is not None:
        loss = loss + penalty()
    return loss


def private_backward(fed: Federation, active_bottom: nn.Module, top: nn.Module, logits: torch.Tensor,
                     targets: torch.Tensor, leaves: dict[int, torch.Tensor], batch: torch.Tensor,
                     penalty: Penalty | None) -> torch.Tensor:
    """The active party's backward pass by the defense that backpropagates (``DefensePoints.backward``): its
    per-sample cross-entropies, its trainable parameters and the received embeddings; a method's penalty (from the
    active party's parameters only, no labels) is added afterwards. Returns the mean loss (detached)."""
    losses = nn.functional.cross_entropy(logits, targets, reduction="none")
    params = [p for m in (active_bottom, top) for p in m.parameters() if p.requires_grad]
    read = fed.hooks.audit_update(ActiveUpdate(batch, logits, params, leaves))
    known = fed.hooks.backward(losses, params, leaves, batch, known=None if read is None else read.known)
    if read is not None:
        read.released(known)
    if penalty is not None:
        penalty().backward()
    return losses.detach().mean()


def local_update(
    fed: Federation, bottoms: list[nn.Module], top: nn.Module, batch: torch.Tensor, y: torch.Tensor,
    exchange: Exchange, *, penalty: Penalty | None = None,
) -> None:
    """One FedBCD local update, with no communication: the active party trains on its fresh representation beside
    the passive parties' stale received embeddings, each passive party backpropagates its stale received gradient
    through a fresh forward pass of its own batch."""
    x_active, targets = fed.hooks.active_batch(fed.active.x_train[batch], first_targets(fed, batch, y))
    stale = {p.index: exchange.received[p.index] for p in fed.passive}
    logits = top([bottoms[ACTIVE](x_active), *(fed.hooks.receive(k, h) for k, h in stale.items())])
    targets = fed.hooks.soft_targets(logits, targets, batch)
    if fed.hooks.backpropagates():
        private_backward(fed, bottoms[ACTIVE], top, logits, targets, {}, batch, penalty)
    else:
        active_loss(fed, logits, targets, stale, y, penalty).backward()
    for p in fed.passive:
        if p.index in exchange.gradients:
            x = p.x_train[batch]
            passive_update(fed, p.index, bottoms[p.index], x, bottoms[p.index](x), exchange.gradients[p.index], batch)


def passive_update(fed: Federation, party: int, bottom: nn.Module, x: torch.Tensor, sent: torch.Tensor,
                   gradient: torch.Tensor, ids: torch.Tensor) -> None:
    """Passive party ``party``'s backward pass from the ``gradient`` it received for the rows ``sent`` (computed from
    its features ``x`` of batch ``ids``): by the defense that backpropagates for it (``passive_backward``), else the
    received gradient with its defenses' own loss terms (``passive_loss``)."""
    hooks = fed.hooks
    if hooks.passive_backpropagates(party):
        hooks.passive_backward(party, bottom, x, sent, gradient, ids)
    else:
        backward_with(sent, gradient, hooks.passive_loss(party, FINETUNE, x, sent))


def backward_with(output: torch.Tensor, grad: torch.Tensor, extra: torch.Tensor | None = None) -> None:
    """``output.backward(grad)``, bit for bit (d sum(output * grad) / d output = 1 * grad), without the
    import of sympy (0.3 s per process) that ``Tensor.backward`` makes when given a gradient tensor; ``extra``, a
    term of the party's own loss, is backpropagated with it."""
    objective = (output * grad).sum()
    (objective if extra is None else objective + extra).backward()


@torch.no_grad()
def predict(fed: Federation, trained: Trained, *, ids: torch.Tensor | None = None, batch_size: int = 4096
            ) -> torch.Tensor:
    """Logits of the federated model on the test rows, or on the training rows ``ids``; passive parties send
    embeddings (of training rows with their ids; test rows carry none, and go in order)."""
    for module in (*trained.bottoms, trained.top):
        module.eval()
    rows = torch.arange(fed.active.x_test.shape[0], device=fed.device) if ids is None else ids
    out = []
    for batch in rows.split(batch_size):
        reps = []
        for p in fed.parties:
            x = (p.x_test if ids is None else p.x_train)[batch]
            h = trained.bottoms[p.index](x)
            if p.index != ACTIVE:
                sent = Message(EMBEDDING, INFERENCE, p.index, ACTIVE, h, None if ids is None else batch,
                               test=ids is None)
                h = fed.hooks.receive(p.index, fed.channel.send(sent))
            reps.append(h)
        out.append(fed.hooks.predictions(trained.top(reps)))
    return torch.cat(out)
