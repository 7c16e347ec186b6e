"""The adversary's side of a run: what it holds (its view), what it answers (its inference), and what it
does during training (:class:`AdversaryHooks`, installed at the engine's hook points).

Core interfaces: the runner builds the view and scores the inference; attacks (in ``attacks/``)
read the one and return the other. The view has no field holding the targets' labels.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import torch
from torch import nn

from vflpriv.data.base import PartySpec
from vflpriv.engine.channel import Inbox
from vflpriv.engine.hooks import PassiveStep, TrainingHooks


@dataclass(frozen=True)
class Observation:
    """Which of its own training steps the adversary records for an attack, and what of each: the first
    ``steps`` exchanges (None: all) of the ``first``, ``last`` or ``all`` finetuning epochs, each with the
    embedding it sent and the gradient it received, and, with ``bottom``, a copy of its bottom model as it was
    before applying that gradient (a few megabytes each: ask for it on few steps)."""

    epochs: Literal["first", "last", "all"] = "first"
    steps: int | None = 1
    bottom: bool = False

    def wants(self, epoch: int, step: int, *, first: int, last: int) -> bool:
        in_epoch = self.epochs == "all" or epoch == (first if self.epochs == "first" else last)
        return in_epoch and (self.steps is None or step < self.steps)


@dataclass(frozen=True)
class ObservedStep:
    """One recorded step of the adversary's own training (see :class:`vflpriv.engine.hooks.PassiveStep`)."""

    epoch: int
    step: int
    ids: torch.Tensor
    inputs: torch.Tensor
    embedding: torch.Tensor
    gradient: torch.Tensor
    bottom: nn.Module | None


class Behaviour(Protocol):
    """What an acting attack does in training: the optimiser the adversary trains its own parameters with."""

    def optimizer(self, params: list[nn.Parameter], recipe: Any, make: Callable[[], Any]) -> Any: ...


class AdversaryHooks(TrainingHooks):
    """The adversary's hooks: at its own party only, record the steps some attack asked for and act as the acting
    attack (if any) says; every other party gets the default behaviour."""

    def __init__(self, party: int, observations: list[Observation], behaviour: Behaviour | None = None):
        self.party = party
        self.observations = observations
        self.behaviour = behaviour
        self.recorded: list[ObservedStep] = []
        self._first: int | None = None

    def passive_step(self, step: PassiveStep) -> None:
        if step.party != self.party or not self.observations:
            return
        first = self._first = step.epoch if self._first is None else self._first
        if self.recorded and step.epoch > self.recorded[-1].epoch:  # a new epoch: forget what no request keeps
            self.recorded = [s for s in self.recorded if any(
                o.epochs != "last" and o.wants(s.epoch, s.step, first=first, last=step.epoch) for o in self.observations)]
        wanting = [o for o in self.observations if o.wants(step.epoch, step.step, first=first, last=step.epoch)]
        if not wanting:
            return
        bottom = copy.deepcopy(step.bottom) if any(o.bottom for o in wanting) else None
        self.recorded.append(ObservedStep(step.epoch, step.step, step.ids, step.inputs, step.embedding.detach(),
                                          step.gradient, bottom))

    def passive_optimizer(self, party: int, params: list[nn.Parameter], recipe: Any, make: Callable[[], Any]) -> Any:
        if party == self.party and self.behaviour is not None:
            return self.behaviour.optimizer(params, recipe, make)
        return make()

    def steps_for(self, observation: Observation | None) -> tuple[ObservedStep, ...]:
        """The recorded steps ``observation`` asked for (of the last epoch recorded, for ``last``)."""
        if observation is None or not self.recorded:
            return ()
        first, last = self._first, max(s.epoch for s in self.recorded)
        return tuple(s for s in self.recorded if observation.wants(s.epoch, s.step, first=first, last=last))


#: The target set of a tuned attack's search: auxiliary samples it hides from itself to score a candidate.
HOLDOUT = "holdout"


@dataclass(frozen=True)
class AdversaryView:
    """Everything the adversary (a passive party) holds after the attacked phase.

    ``targets`` maps a target set name to the adversary's features of those samples: ``test``
    (inference samples) and ``train`` (the aligned training samples it took part in training on).
    ``target_ids`` gives the global ids of the ``train`` targets (the adversary knows its own ids). A tuned
    attack's search adds :data:`HOLDOUT` to both: auxiliary samples whose labels it withholds from the candidate.
    """

    party: int
    phase: str
    num_classes: int
    spec: PartySpec
    encoder: nn.Module | None
    local_x: torch.Tensor
    aux_x: torch.Tensor
    aux_y: torch.Tensor
    aux_ids: torch.Tensor
    targets: dict[str, torch.Tensor]
    target_ids: dict[str, torch.Tensor]
    inbox: Inbox
    generator: torch.Generator
    device: torch.device
    #: Its own training steps it recorded for this attack (the attack's ``observation()``), in order.
    steps: tuple[ObservedStep, ...] = ()
    #: The finetuning protocol every party agreed to (``FinetuneConfig``: top, batch size, epochs, optimiser);
    #: a participant knows it, as it knows whether it sends logits to a sum or embeddings to a trained top.
    recipe: Any = None


@dataclass
class Inference:
    """An attack's guesses for one target set: labels, and positive-class scores for binary tasks.

    Optional extras, each scored by the runner against labels the attack never sees:

    - ``covered``: which targets the attack guesses (a boolean mask over the target set; None: all). An attack
      on one batch (BLI) guesses its batch only; the runner scores it, and the prior, on those targets.

    - ``per_epoch``: the predictions after each training epoch of the attack, for the explicitly
      optimistic best-epoch number (selected on the target labels; what the public codes report).
    - ``clusters``: a cluster index per target (gradient clustering), for the Hungarian-matched
      accuracy, an upper bound on any one-to-one naming of the clusters.
    - ``batch_scores``: (positions in the target set, positive-class scores) per received batch, for
      Li et al.'s leak AUC: the AUC within each batch, averaged over the batches holding both classes.
    - ``confidence``: how sure the attack is of each guess (higher: surer; any scale): the precision of its most
      confident guesses is scored, and the canary audit lets it abstain on all but its most confident ones.
    """

    predictions: torch.Tensor
    scores: torch.Tensor | None = None
    covered: torch.Tensor | None = None
    per_epoch: list[torch.Tensor] = field(default_factory=list)
    clusters: torch.Tensor | None = None
    batch_scores: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)
    confidence: torch.Tensor | None = None


@dataclass(frozen=True)
class FeatureView:
    """Everything a feature adversary (a party, or the server: ``party`` is ``SERVER``) holds about its victim's
    features after the attacked phase, and nothing else.

    ``received`` maps a target set name to the per-sample rows it received from the victim (``kind``: embeddings, or
    the gradients a passive adversary receives about the active party), the latest row per sample of the attacked
    phase: ``aux`` (its known samples), ``train`` (the victim's other aligned training samples it received rows of,
    global ids in ``target_ids``) and ``test`` (the rows received at inference, in order). ``own`` holds its own
    features of the same samples (none for the server), ``aux_victim`` the victim's features of its known samples,
    min-max scaled to [0, 1] on the training data as every score is (the victim's schema, ``victim_spec``, is shared
    knowledge in VFL). ``models`` are its own trained models (the active party: ``bottom`` and ``top``; a passive
    party: ``bottom``; the server: none). A tuned attack's search adds :data:`HOLDOUT` to ``received`` and ``own``:
    known samples whose victim features it withholds from the candidate.
    """

    party: int
    victim: int
    phase: str
    kind: str
    victim_spec: PartySpec
    spec: PartySpec | None
    received: dict[str, torch.Tensor]
    own: dict[str, torch.Tensor]
    aux_ids: torch.Tensor
    aux_victim: torch.Tensor
    target_ids: dict[str, torch.Tensor]
    inbox: Inbox
    models: Mapping[str, nn.Module]
    generator: torch.Generator
    device: torch.device

    @property
    def targets(self) -> list[str]:
        """The target sets to reconstruct (every received set but the known samples)."""
        return [name for name in self.received if name != "aux"]


@dataclass
class Reconstruction:
    """A feature attack's guess of one target set: the victim's features of each target, scaled to [0, 1] (shape:
    targets x the victim's sample shape)."""

    features: torch.Tensor
