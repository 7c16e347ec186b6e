"""The points in a training loop where an adversary or a defense acts: explicit, documented, and called by the
loop itself. The shared finetuning loop calls every one; a method with its own loop declares in its ``supports``
which ones it calls, and the planner refuses an attack or a defense that needs another.

The adversary (a passive party), on its own party only:

- ``passive_step`` (observe): passive party k has received the gradient for a batch it sent (in split learning,
  just before applying it): its bottom model as it is then (in the mode it computed the embedding in), the batch
  (global row ids) and its features, the embedding it sent and the gradient as the channel delivered it.
- ``passive_optimizer`` (act): the optimiser passive party k trains its own parameters with.

The defenses of the active party (the label holder), inside its own computation:

- ``active_batch``: its inputs and training targets of a batch (mixup mixes both; a confusional autoencoder
  replaces the labels by soft fake ones);
- ``receive``: each received passive embedding inside its model (MID's bottleneck, whose parameters it owns
  and trains: ``active_parameters``);
- ``loss_terms``: terms added to its loss (MID's KL, dCor between embeddings and labels);
- ``sent_gradient``: how it computes the gradient it sends a passive party (GradPerturb);
- ``backward``: how it backpropagates its loss: a defense that ``backpropagates`` gets the per-sample losses, sets its
  parameters' gradients and the received embeddings' ``.grad`` itself (DP-SGD: per-sample clipping and noise);
- ``soft_targets``: its soft targets of a batch from its model's current outputs (``SOFT_TARGETS``: ALIBI's posterior
  of each noisy label under the model's prediction as the prior, recomputed at every update);
- ``predictions``: its test outputs (the autoencoder decodes them).

The defenses of a passive party (the victim of a feature attack), on what it computes and sends:

- ``passive_bottom``: the module it computes the embedding it sends with, once at the start of finetuning: a defense
  wraps its bottom (MID's bottleneck at the sender, a narrow layer at the cut, per-row clipping and noise); the wrapped
  module is what it trains, sends from and holds afterwards (its parameters train with the party's optimiser);
- ``passive_loss``: terms added to its own loss, from its features of the batch and the embedding it sent (NoPeek's
  distance correlation, an imagined decoder's reconstruction error); the shared loop backpropagates them beside the
  gradient it received;
- ``passive_backward``: how it turns the gradient it received into its update: a defense that
  ``passive_backpropagates`` sets its parameters' gradients itself (DP-SGD on its bottom: per-sample clipping, noise);
- in pretraining (``pretrain_passive_loss``, called by the SSL loops of ``vflpriv.methods.pretraining`` and
  ``fedhssl``): ``passive_loss`` with phase ``pretrain``, from its views of a batch and its encoder's outputs (the cut
  the finetuning embedding comes from), added to its SSL loss; no label is in reach there.

A measurement, not a party's act:

- ``epoch_end`` (``measure:epoch-end``, :meth:`vflpriv.engine.Federation.epoch_end`): the end of each finetuning
  epoch, where a monitor reads the model as it stands (paper 003's Table 1: utility per epoch with the MB sent
  so far) without sending, counting or drawing anything the training sees.

An audit, not a party's act:

- ``audit_update`` (``audit:active-update``): before each private update of the active party (a defense that
  ``backpropagates``: DP-SGD), its state (:class:`ActiveUpdate`), handed to the auditor a run names
  (``finetune.auditor``, ``vflpriv.auditors``) and to nothing else; what it returns (:class:`AuditRead`) is called once
  the update is released (its parameters' ``.grad`` and the received embeddings' ``.grad`` hold the noisy update and
  rows), with the defense's clipped per-sample gradients summed over the rows whose labels the auditor knows (the
  defense computes them anyway: ``backward``'s ``known``). An auditor holds privileges no party holds (the active
  party's state at every update), so it measures a DP claim and never enters an attack's numbers.
- ``audit_embeddings`` (``audit:passive-embeddings``): each exchange's embeddings, as the parties computed them and
  before a passive party sends its own, with the batch's ids and the active party's top: an auditor that instantiates
  a malicious passive party (DP's adversary chooses every input but the secret label) may replace the rows of its
  canaries; the shared loop sends, and trains the active party on, what it returns.

Message defenses act on the channel, not here. :class:`TrainingHooks` is the honest default: nothing
observed, every party's default optimiser, the active party's computation unchanged, nothing audited.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from vflpriv.common.declarations import keep_defined
from vflpriv.common.points import (  # the defense points, below the registry's check of a defense's hook_points
    ACTIVE_BACKWARD,
    ACTIVE_BATCH,
    ACTIVE_LOSS,
    ACTIVE_MODEL,
    DEFENSE_POINTS,
    GRADIENT_COMPUTATION,
    PASSIVE_BACKWARD,
    PASSIVE_BOTTOM,
    PASSIVE_LOSS,
    PASSIVE_POINTS,
    PREDICTIONS,
    PRETRAIN_PASSIVE_LOSS,
    SOFT_LABELS,
    SOFT_TARGETS,
)
from vflpriv.engine.audit_guard import AuditRead, ReadGuard

#: Hook point names, as methods declare them in ``supports`` and attacks and defenses in what they need.
PASSIVE_STEP = "observe:passive-step"
PASSIVE_OPTIMIZER = "act:passive-optimizer"
EPOCH_END = "measure:epoch-end"
AUDIT_UPDATE = "audit:active-update"
AUDIT_EMBEDDINGS = "audit:passive-embeddings"


@dataclass(frozen=True)
class PassiveStep:
    """What passive party ``party`` holds when it has received a gradient: the batch's global ids and its own
    features of them, its bottom, the embedding it sent, the gradient it received.

    ``epoch`` counts finetuning epochs from 0 as the messages do; ``step`` numbers the exchanges of that epoch
    from 0 (with FedBCD's local updates, only the exchanges: local updates receive nothing).
    """

    party: int
    epoch: int
    step: int
    ids: torch.Tensor
    inputs: torch.Tensor
    bottom: nn.Module
    embedding: torch.Tensor
    gradient: torch.Tensor


@dataclass(frozen=True)
class ActiveUpdate:
    """One private update of the active party as an auditor sees it: the batch's global ids, the active party's outputs
    for it (``logits``, their graph alive), the parameters the update reaches, and each passive party's received
    embedding in the graph (``leaves``; none at FedBCD's local updates, which send no rows). Released, each parameter's
    ``.grad`` and each leaf's ``.grad`` are the noisy update and rows, over the batch size."""

    ids: torch.Tensor
    logits: torch.Tensor
    params: list[nn.Parameter]
    leaves: dict[int, torch.Tensor]


#: The gradient of the active party's loss with respect to one received embedding, had every label of the batch
#: been class ``c`` (GradPerturb's per-class gradients): ``per_class(c)``.
PerClass = Callable[[int], torch.Tensor]


class DefensePoints:
    """The defenses' hook points (the active party's and the passive parties'), each the identity: a defense
    overrides those it acts at (and lists them in its ``hook_points``); :class:`DefenseChain` applies several in
    order."""

    def __init_subclass__(cls, **kwargs):
        """Keeps a defense's members as vflpriv's module defines them (its data decides a claim: review eps6 E4)."""
        super().__init_subclass__(**kwargs)
        keep_defined(cls)

    def active_batch(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The active party's inputs and training targets of a batch (class indices, or one probability row
        per sample), from its features ``x`` and its targets so far ``y`` (its labels, first)."""
        return x, y

    def receive(self, party: int, embedding: torch.Tensor) -> torch.Tensor:
        """A received embedding of ``party`` as the active party's model uses it (training and prediction)."""
        return embedding

    def loss_terms(self, received: dict[int, torch.Tensor], y: torch.Tensor) -> torch.Tensor | None:
        """A term added to the active party's loss (from the embeddings it received and its labels), or None."""
        return None

    def sent_gradient(self, party: int, gradient: torch.Tensor, per_class: PerClass) -> torch.Tensor:
        """The gradient the active party sends ``party``, from the true one (and, on demand, per-class ones)."""
        return gradient

    def predictions(self, logits: torch.Tensor) -> torch.Tensor:
        """The active party's test outputs (logits) from its model's."""
        return logits

    def soft_targets(self, logits: torch.Tensor, targets: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """The training targets of batch ``ids`` given the active party's current ``logits`` for it (read, never
        backpropagated through), from its targets so far."""
        return targets

    def backpropagates(self) -> bool:
        """Whether :meth:`backward` replaces the active party's backward pass (the loop then hands it per-sample
        losses instead of backpropagating their mean)."""
        return False

    def backward(self, losses: torch.Tensor, params: list[nn.Parameter], leaves: dict[int, torch.Tensor],
                 ids: torch.Tensor, *, known: torch.Tensor | None = None) -> list[torch.Tensor | None] | None:
        """Backpropagate the per-sample losses ``losses`` of batch ``ids``: set the gradients of the active party's
        ``params`` (as those of their mean) and the ``.grad`` of each received embedding in ``leaves`` (by party).
        With ``known`` (batch positions; an auditor's, :class:`AuditRead`), a defense that clips per sample returns
        each parameter's sum of its clipped per-sample gradients over them (None where no loss reaches it)."""
        losses.mean().backward()
        return None

    def active_parameters(self) -> list[nn.Parameter]:
        """Parameters a defense adds to the active party's model (trained by its optimiser)."""
        return []

    def needs_per_class(self) -> bool:
        """Whether ``sent_gradient`` reads per-class gradients (the loop then keeps the top's graph for them)."""
        return False

    def generators(self) -> list[torch.Generator]:
        """The random streams these points draw from (a measurement restores them); none by default."""
        return []

    def passive_bottom(self, party: int, bottom: nn.Module) -> nn.Module:
        """The module passive party ``party`` computes (and sends) its finetuning and inference embeddings with."""
        return bottom

    def passive_loss(self, party: int, phase: str, x: torch.Tensor, sent: torch.Tensor) -> torch.Tensor | None:
        """A term passive party ``party`` adds to its own loss in ``phase`` from its features ``x`` of the batch and
        the embedding ``sent`` it computed from them (in pretraining: its views and its encoder's outputs), or None."""
        return None

    def passive_backpropagates(self, party: int) -> bool:
        """Whether :meth:`passive_backward` replaces passive party ``party``'s backward pass."""
        return False

    def passive_backward(self, party: int, bottom: nn.Module, x: torch.Tensor, sent: torch.Tensor,
                         gradient: torch.Tensor, ids: torch.Tensor) -> None:
        """Set the gradients of ``bottom``'s parameters from the ``gradient`` party ``party`` received for the rows
        ``sent`` it computed from its features ``x`` of batch ``ids`` (the default: backpropagate sum(sent *
        gradient))."""
        (sent * gradient).sum().backward()


keep_defined(DefensePoints)  # its subclasses keep theirs as they are created (review acc A2)


class DefenseChain(DefensePoints):
    """Several defenses at the active party's points, applied in the order they are listed."""

    def __init__(self, defenses: list[DefensePoints]):
        self.defenses = list(defenses)

    def active_batch(self, x, y):
        for d in self.defenses:
            x, y = d.active_batch(x, y)
        return x, y

    def receive(self, party, embedding):
        for d in self.defenses:
            embedding = d.receive(party, embedding)
        return embedding

    def loss_terms(self, received, y):
        terms = [t for t in (d.loss_terms(received, y) for d in self.defenses) if t is not None]
        return sum(terms[1:], terms[0]) if terms else None

    def sent_gradient(self, party, gradient, per_class):
        for d in self.defenses:
            gradient = d.sent_gradient(party, gradient, per_class)
        return gradient

    def predictions(self, logits):
        for d in reversed(self.defenses):  # the last applied to the targets undoes first
            logits = d.predictions(logits)
        return logits

    def soft_targets(self, logits, targets, ids):
        for d in self.defenses:
            targets = d.soft_targets(logits, targets, ids)
        return targets

    def backpropagates(self):
        return any(d.backpropagates() for d in self.defenses)

    def backward(self, losses, params, leaves, ids, *, known=None):
        """The one defense that backpropagates (the planner admits one; it refuses any other at the active party);
        ``known`` only where an auditor asks (a plugin's ``backward`` written without it still runs unaudited)."""
        own = next(d for d in self.defenses if d.backpropagates())
        return own.backward(losses, params, leaves, ids) if known is None else own.backward(losses, params, leaves,
                                                                                             ids, known=known)

    def active_parameters(self):
        return [p for d in self.defenses for p in d.active_parameters()]

    def needs_per_class(self):
        return any(d.needs_per_class() for d in self.defenses)

    def generators(self):
        return [g for d in self.defenses for g in d.generators()]

    def passive_bottom(self, party, bottom):
        for d in self.defenses:
            bottom = d.passive_bottom(party, bottom)
        return bottom

    def passive_loss(self, party, phase, x, sent):
        terms = [t for t in (d.passive_loss(party, phase, x, sent) for d in self.defenses) if t is not None]
        return sum(terms[1:], terms[0]) if terms else None

    def passive_backpropagates(self, party):
        return any(d.passive_backpropagates(party) for d in self.defenses)

    def passive_backward(self, party, bottom, x, sent, gradient, ids):
        """The one defense that backpropagates for ``party`` (the planner admits no other at its points)."""
        next(d for d in self.defenses if d.passive_backpropagates(party)).passive_backward(party, bottom, x, sent,
                                                                                             gradient, ids)


class TrainingHooks(DefensePoints):
    """Every hook point: the adversary's (nothing observed, default optimisers), the active party's (identity) and the
    auditor's (none)."""

    def passive_step(self, step: PassiveStep) -> None:
        """Called by passive party ``step.party`` when it has received a gradient (before it applies it)."""

    def passive_optimizer(self, party: int, params: list[nn.Parameter], recipe: Any, make: Callable[[], Any]) -> Any:
        """The optimiser passive party ``party`` trains ``params`` (its own) with under the finetuning ``recipe``;
        ``make()`` builds the default one."""
        return make()

    def audit_update(self, update: ActiveUpdate) -> AuditRead | None:
        """Called before a private update of the active party; returns what the auditor reads of it (:class:`AuditRead`:
        the known rows whose clipped sum it wants, and what to call once the update is released), or None."""
        return None

    def audit_embeddings(self, ids: torch.Tensor, local: list[torch.Tensor], top: nn.Module) -> list[torch.Tensor]:
        """Every party's embedding of the batch ``ids`` at an exchange (active first), before the passive ones are
        sent; returns what is sent (unchanged unless an auditor crafts its canaries' rows)."""
        return local


class CombinedHooks(TrainingHooks):
    """The adversary's points from ``adversary``, the active party's from ``defenses``, the audit's from ``auditor`` (an
    object with ``audit_update``, or None): one ``fed.hooks``. ``hidden``: the training ids whose labels the auditor
    must not read (its canaries'), which no :class:`AuditRead` may ask the defense's gradients of."""

    def __init__(self, adversary: TrainingHooks, defenses: DefensePoints, auditor: Any = None,
                 hidden: torch.Tensor | None = None):
        self.adversary, self.defenses, self.auditor, self.hidden = adversary, defenses, auditor, hidden
        self._guard = ReadGuard(hidden)

    def audit_update(self, update: ActiveUpdate) -> AuditRead | None:
        """The auditor's read, refused by :class:`vflpriv.engine.audit_guard.ReadGuard` (ProtocolError naming the
        auditor's class) where it names a hidden row or is no read of this update's rows the defense can serve."""
        read = None if self.auditor is None else self.auditor.audit_update(update)
        if read is not None:
            self._guard.check(self.auditor, read, update.ids)
        return read

    def audit_embeddings(self, ids, local, top):
        return local if self.auditor is None else self.auditor.audit_embeddings(ids, local, top)

    def passive_step(self, step: PassiveStep) -> None:
        self.adversary.passive_step(step)

    def passive_optimizer(self, party, params, recipe, make):
        return self.adversary.passive_optimizer(party, params, recipe, make)

    def active_batch(self, x, y):
        return self.defenses.active_batch(x, y)

    def receive(self, party, embedding):
        return self.defenses.receive(party, embedding)

    def loss_terms(self, received, y):
        return self.defenses.loss_terms(received, y)

    def sent_gradient(self, party, gradient, per_class):
        return self.defenses.sent_gradient(party, gradient, per_class)

    def predictions(self, logits):
        return self.defenses.predictions(logits)

    def soft_targets(self, logits, targets, ids):
        return self.defenses.soft_targets(logits, targets, ids)

    def backpropagates(self):
        return self.defenses.backpropagates()

    def backward(self, losses, params, leaves, ids, *, known=None):
        return self.defenses.backward(losses, params, leaves, ids, known=known)

    def active_parameters(self):
        return self.defenses.active_parameters()

    def needs_per_class(self):
        return self.defenses.needs_per_class()

    def generators(self):
        return [*self.adversary.generators(), *self.defenses.generators()]

    def passive_bottom(self, party, bottom):
        return self.defenses.passive_bottom(party, bottom)

    def passive_loss(self, party, phase, x, sent):
        return self.defenses.passive_loss(party, phase, x, sent)

    def passive_backpropagates(self, party):
        return self.defenses.passive_backpropagates(party)

    def passive_backward(self, party, bottom, x, sent, gradient, ids):
        self.defenses.passive_backward(party, bottom, x, sent, gradient, ids)
