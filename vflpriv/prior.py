"""The adversary prior: what it can infer with no federation at all (FedHSSL §VI; REFERENCE.md §9).

- ``simsiam`` (A_SimSiam, the default): the adversary pretrains its own encoder with plain SimSiam on
  its local samples, then fits the attack's Linear head on its auxiliary labels over that frozen encoder.
- ``aux``: a freshly initialised encoder of the same architecture plus the same Linear head, trained
  together from scratch on the auxiliary labels only.
- ``same-attack``: the attack itself, run on the adversary's own SimSiam encoder with an empty inbox, drawing the
  attack's own random stream (on the same encoder it guesses exactly what the attack guesses).
  For an attack that trains more than a head (``mc-mixmatch`` fine-tunes the bottom semi-supervised on
  the adversary's local samples) this isolates what the federation added from what the attack's own
  training on local data achieves; A_SimSiam would credit the federation with both. Only for attacks
  that read the encoder alone: without a federation no message was ever received.

Against a tuned attack (``attack.tune``) the ``simsiam`` and ``same-attack`` priors are tuned the same way
(:func:`tuned_prior`): an adversary that tunes its attack tunes its fallback too, and a tuned attack compared with an
untuned prior would show the tuning as leakage (a method sending nothing label-bearing, local-simsiam, read
+0.020 for tuned mc against the untuned A_SimSiam head). ``aux`` stays untuned.

``attack.prior_ssl=own`` replaces SimSiam behind ``simsiam`` and ``same-attack`` by the method's own pretraining done
alone (``Method.pretrain_alone``; methods whose pretraining exchanges nothing, where it is the adversary's pretrained
encoder exactly), so that leakage measures the federation rather than one SSL flavour against another (M5).

Each prior maps the adversary's view to its predicted labels of every target set. The adversary's own
SimSiam encoder is handed in as a thunk (``own_encoder``): the runner caches it like a method's
pretraining, so every attack and every run of a seed share one. Drawn as the dashed line of
privacy-utility plots; leakage = attack accuracy - prior accuracy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

import torch
from torch import nn

from vflpriv.adversary import AdversaryView
from vflpriv.attacks.model_completion import ModelCompletion, ModelCompletionOptions
from vflpriv.attacks.search import SearchResult, search
from vflpriv.config import ModelConfig
from vflpriv.engine.channel import Inbox
from vflpriv.models.encoders import build_encoder, init_parameters
from vflpriv.models.training import apply_in_batches, fit_classifier, require_finite

HEAD_LR = 0.005
HEAD_WEIGHT_DECAY = 1e-6
HEAD_BATCH = 64

Encoder = Callable[[], nn.Module]


class Prior(Protocol):
    def __call__(
        self, view: AdversaryView, *, attack: Any, model: ModelConfig, own_encoder: Encoder, epochs: int,
        generator: torch.Generator,
    ) -> dict[str, torch.Tensor]: ...


def _fit_head(encoder: nn.Module, view: AdversaryView, *, epochs, generator, train_encoder) -> dict[str, torch.Tensor]:
    """Linear head (and, if ``train_encoder``, the encoder) fitted on aux; predicted labels of every target set."""
    head = init_parameters(nn.Linear(encoder.out_dim, view.num_classes), generator=generator).to(view.device)
    if train_encoder:
        net, inputs = nn.Sequential(encoder, head), view.aux_x
        targets = view.targets
    else:
        encoder.eval().requires_grad_(False)
        net, inputs = head, apply_in_batches(encoder, view.aux_x)
        targets = {name: apply_in_batches(encoder, x) for name, x in view.targets.items()}
    fit_classifier(net, inputs, view.aux_y, epochs=epochs, lr=HEAD_LR, weight_decay=HEAD_WEIGHT_DECAY,
                   batch_size=HEAD_BATCH, generator=generator, what="prior's head")
    return {name: require_finite(apply_in_batches(net, x), "the prior's logits").argmax(1) for name, x in targets.items()}


def aux_prior(view: AdversaryView, *, attack, model, own_encoder, epochs, generator) -> dict[str, torch.Tensor]:
    """Fresh encoder + head trained from scratch on the auxiliary labels."""
    encoder = build_encoder(view.spec, model, generator=generator).to(view.device)
    return _fit_head(encoder, view, epochs=epochs, generator=generator, train_encoder=True)


def simsiam_prior(view: AdversaryView, *, attack, model, own_encoder, epochs, generator) -> dict[str, torch.Tensor]:
    """A_SimSiam: plain SimSiam on the adversary's local samples, then a Linear head on aux."""
    return _fit_head(own_encoder(), view, epochs=epochs, generator=generator, train_encoder=False)


def same_attack_prior(view: AdversaryView, *, attack, model, own_encoder, epochs, generator) -> dict[str, torch.Tensor]:
    """The attack on the adversary's own SimSiam encoder, as if it had never joined the federation."""
    alone = dataclasses.replace(view, encoder=own_encoder(), inbox=Inbox(owner=view.party), generator=generator)
    return {name: inference.predictions for name, inference in attack.infer(alone).items()}


PRIORS: dict[str, Prior] = {"aux": aux_prior, "simsiam": simsiam_prior, "same-attack": same_attack_prior}
#: Priors tuned with the attack: A_SimSiam's head is ``mc`` over the adversary's own encoder, searched like ``mc``.
TUNED_PRIORS = ("simsiam", "same-attack")


def tuned_prior(view: AdversaryView, *, prior: str, attack: Any, own_encoder: Encoder, epochs: int,
                generator: torch.Generator, budget: int, seed: int) -> dict[str, torch.Tensor]:
    """The prior tuned on the auxiliary labels like the attack (``attacks.search``) on the adversary's own encoder:
    ``same-attack`` the attack itself, ``simsiam`` the A_SimSiam head as ``mc`` (linear, frozen, its epochs)."""
    alone = dataclasses.replace(view, encoder=own_encoder(), inbox=Inbox(owner=view.party), generator=generator)
    chosen = attack if prior == "same-attack" else ModelCompletion(ModelCompletionOptions(
        epochs=epochs, lr=HEAD_LR, weight_decay=HEAD_WEIGHT_DECAY, batch_size=HEAD_BATCH))
    found = search(chosen, alone, budget=budget, seed=seed)
    inferences = found.inferences if isinstance(found, SearchResult) else chosen.infer(alone)
    return {name: inference.predictions for name, inference in inferences.items()}


def reads_only_the_encoder(attack: Any, phase: str) -> bool:
    """Whether ``attack`` can run without a federation (``same-attack`` prior): no received messages and no
    recorded training steps."""
    return (bool(attack.needs_encoder) and not attack.needs_messages and not attack.required_messages(phase)
            and attack.observation() is None)
