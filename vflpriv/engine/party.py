"""Parties and the federation a method is written against (no label reaches a passive party)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from vflpriv.common.seeding import mixed
from vflpriv.config.schema import FinetuneConfig, ModelConfig
from vflpriv.data.base import PartySpec
from vflpriv.data.scenario import Scenario
from vflpriv.engine.channel import Channel
from vflpriv.engine.hooks import TrainingHooks
from vflpriv.engine.message import ACTIVE


@dataclass(frozen=True)
class Party:
    """One party's own data: its feature columns for training and test rows, and its local sample ids."""

    index: int
    spec: PartySpec
    x_train: torch.Tensor
    x_test: torch.Tensor
    local_ids: torch.Tensor
    unaligned_ids: torch.Tensor


@dataclass(frozen=True)
class ActiveParty(Party):
    """The label holder; ``labels[i]`` is -1 where it does not know the label of training row i. ``soft_labels``
    (rows x classes), where a label defense set them, are the probability rows it trains with instead (ALIBI's
    posteriors): the shared loop's targets (hook point ``defend:soft-labels``). ``validation_ids`` (``finetune.validation``)
    are labeled ids it holds out of training, their labels kept apart in ``validation_labels`` (no label defense
    relabels them: they never leave the active party)."""

    labels: torch.Tensor
    label_ids: torch.Tensor
    soft_labels: torch.Tensor | None = None
    validation_ids: torch.Tensor = torch.empty(0, dtype=torch.long)
    validation_labels: torch.Tensor = torch.empty(0, dtype=torch.long)


@dataclass
class Federation:
    """What a method may touch: the parties, the aligned ids, the channel, its settings, and the hook points its
    training loop calls (``vflpriv.engine.hooks``: where the adversary observes or acts)."""

    parties: list[Party]
    aligned: torch.Tensor
    channel: Channel
    num_classes: int
    model: ModelConfig
    finetune: FinetuneConfig
    generator: torch.Generator
    device: torch.device
    hooks: TrainingHooks = field(default_factory=TrainingHooks)
    #: Called at :meth:`epoch_end` with (federation, epoch, bottoms, top); None (the default): nothing is measured.
    monitor: Callable[[Federation, int, list[nn.Module], nn.Module], None] | None = None

    def epoch_end(self, epoch: int, bottoms: list[nn.Module], top: nn.Module) -> None:
        """The measurement point at the end of finetuning epoch ``epoch`` (hook point ``measure:epoch-end``): the
        monitor, if any, with the channel muted (its messages are neither counted nor seen by the adversary), drawing
        from streams forked for it (each generator reseeded from its own seed and the epoch: a defense's noise there is
        not the noise its next training batch or release gets, review fe F4), and afterwards every random stream (the
        method's, the defenses', torch's global one) and every module's train/eval mode as before it, so a measured
        run trains bit for bit as an unmeasured one."""
        if self.monitor is None:
            return
        modes = [(m, m.training) for root in (*bottoms, top) for m in root.modules()]
        streams = {id(g): g for g in (self.generator, *self.hooks.generators())}  # every defense is in the hooks
        states = [(g, g.get_state()) for g in streams.values()]
        with torch.random.fork_rng(devices=[]), self.channel.muted():
            for g in (*streams.values(), torch.default_generator):
                g.manual_seed(mixed(g.initial_seed(), f"monitor:{epoch}"))
            self.monitor(self, epoch, bottoms, top)
        for g, state in states:
            g.set_state(state)
        for m, training in modes:
            m.training = training

    @property
    def active(self) -> ActiveParty:
        party = self.parties[ACTIVE]
        assert isinstance(party, ActiveParty)
        return party

    @property
    def passive(self) -> list[Party]:
        return self.parties[1:]

    def labeled_aligned(self) -> torch.Tensor:
        """Ids split learning trains on: labeled at the active party and held by every party."""
        ids = self.active.label_ids
        return ids[torch.isin(ids, self.aligned)]


def make_parties(scenario: Scenario, device: torch.device) -> list[Party]:
    """Give each party its columns; the active party alone gets the labels it holds."""
    ds = scenario.dataset
    label_ids = scenario.active_label_ids()
    labels = torch.full_like(ds.y_train, -1)
    labels[label_ids] = ds.y_train[label_ids]
    labels[scenario.canaries] = scenario.canary_labels  # random-label canaries train with their drawn labels
    parties: list[Party] = []
    for k in range(ds.parties):
        common = dict(
            index=k,
            spec=ds.specs[k],
            x_train=ds.x_train[k].to(device),
            x_test=ds.x_test[k].to(device),
            local_ids=scenario.local(k).to(device),
            unaligned_ids=scenario.unaligned[k].to(device),
        )
        if k == ACTIVE:
            parties.append(ActiveParty(**common, labels=labels.to(device), label_ids=label_ids.to(device),
                                       validation_ids=scenario.validation.to(device),
                                       validation_labels=ds.y_train[scenario.validation].to(device)))
        else:
            parties.append(Party(**common))
    return parties
