"""The adversary prior: what it can infer with no federation at all (FedHSSL §VI; REFERENCE.md §9), in one place:
its choice and checks (planned), its own pretraining, its tuning, and its caching.

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

Planning turns a run's attack block into a :class:`PriorPlan` (:func:`plan_prior`), refusing what cannot work; the
run then only reads it. The adversary's own encoder and each prior's predictions depend on data, partition, model and
seed only (and, for ``same-attack``, the attack): computed once per key, however many attacks, runs and processes ask
(kept in this process, and in the verified cache for the other processes of a sweep). Drawn as the dashed line of
privacy-utility plots; leakage = attack accuracy - prior accuracy.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from vflpriv.attacks.labels.model_completion import ModelCompletion, ModelCompletionOptions
from vflpriv.attacks.search import SearchResult, search
from vflpriv.common.errors import IncompatibleError, ProtocolError
from vflpriv.common.seeding import generator
from vflpriv.config.keys import code_mark, config_hash
from vflpriv.config.registry import ATTACKS, METHODS
from vflpriv.config.schema import LABEL_FIELDS, RunConfig
from vflpriv.data.load import data_of
from vflpriv.engine.adversary import AdversaryView
from vflpriv.engine.channel import Inbox
from vflpriv.methods.local_ssl import LocalOptions, local_ssl_encoder
from vflpriv.methods.pretraining import SSLOptions
from vflpriv.methods.towers import build_local_encoder
from vflpriv.models.encoders import build_encoder, init_parameters
from vflpriv.models.training import apply_in_batches, fit_classifier, require_finite
from vflpriv.store import cache

HEAD_LR = 0.005
HEAD_WEIGHT_DECAY = 1e-6
HEAD_BATCH = 64

#: Priors that train a head on the adversary's auxiliary labels.
PRIORS_NEEDING_AUX = ("simsiam", "aux", "same-attack")
#: Priors over the adversary's own pretrained encoder (``attack.prior_ssl`` picks that pretraining).
OWN_ENCODER_PRIORS = ("simsiam", "same-attack")
#: Priors tuned with the attack: A_SimSiam's head is ``mc`` over the adversary's own encoder, searched like ``mc``.
TUNED_PRIORS = ("simsiam", "same-attack")
#: What the adversary's own SimSiam pretraining takes from an SSL method it is compared with.
PRIOR_FROM_METHOD = ("batch_size", "lr", "lr_per_256", "optimizer", "weight_decay", "cosine", "grad_clip",
                     "augment", "corruption_rate", "clean_view", "crop_scale", "flip",
                     "color_jitter", "jitter_p", "blur_sigma", "blur_p")

Encoder = Callable[[], nn.Module]


@dataclasses.dataclass(frozen=True)
class PriorPlan:
    """One attack's prior, resolved while planning: which prior, over which own pretraining (``own``: the method's
    pretraining done alone; else plain SimSiam with ``ssl`` settings), tuned or not."""

    config: RunConfig
    kind: str
    own: bool
    ssl: dict
    tuned: bool


def prior_pretraining(method: str, prior_ssl: str) -> str:
    """``attack.prior_ssl`` resolved for ``method``: ``auto`` is ``own`` where the method's pretraining can be done
    alone (``Method.pretrain_alone``), else ``simsiam``."""
    if prior_ssl != "auto":
        return prior_ssl
    return "own" if METHODS.get(method).can_pretrain_alone() else "simsiam"


def prior_options(cfg: RunConfig) -> dict:
    """Settings (``LocalOptions``) of the adversary's own SimSiam pretraining: for an SSL method, its budget
    (passes over the local samples, batch, lr, optimiser, schedule) and its views, so that the prior is as
    well trained as the encoders it is compared with (an under-trained prior inflates leakage); the lr
    before the method's guidance rescaling, as plain SimSiam has no guidance (gamma 0: factor 1, like
    FedLocalSimSiam). Other methods: ``LocalOptions``' defaults."""
    options = METHODS.get(cfg.method.name).Options.model_validate(cfg.method.options)
    if not isinstance(options, SSLOptions):
        return {}
    return {**options.model_dump(mode="json", include=set(PRIOR_FROM_METHOD)), "epochs": options.ssl_epochs()}


def plan_prior(run: RunConfig, attack: Any) -> PriorPlan:
    """The prior of ``attack`` in ``run``, refused with the reason where it cannot be computed."""
    cfg, method = run.attack, run.method.name
    if cfg.prior == "same-attack" and not reads_only_the_encoder(attack, cfg.phase):
        raise IncompatibleError(
            f"prior 'same-attack' reruns the attack without a federation, but '{cfg.name}' reads "
            "messages received in training; use attack.prior=simsiam, aux or none"
        )
    own = prior_pretraining(method, cfg.prior_ssl) == "own"
    if own and cfg.prior in OWN_ENCODER_PRIORS and not METHODS.get(method).can_pretrain_alone():
        raise IncompatibleError(
            f"attack.prior_ssl=own pretrains the adversary alone with the method's own pretraining, but method "
            f"'{method}' has no pretraining a party can do alone (it pretrains with the federation, or not at "
            "all); use attack.prior_ssl=simsiam")
    if run.partition.aux == 0 and cfg.prior in PRIORS_NEEDING_AUX:
        raise IncompatibleError(
            f"prior '{cfg.prior}' trains on the adversary's auxiliary labels; raise partition.aux or use attack.prior=none"
        )
    ssl = {"own": [method, run.method.model_dump(mode="json")]} if own else prior_options(run)
    return PriorPlan(run, cfg.prior, own, ssl, cfg.tune and cfg.prior in TUNED_PRIORS)


def reads_only_the_encoder(attack: Any, phase: str) -> bool:
    """Whether ``attack`` can run without a federation (``same-attack`` prior): no received messages and no
    recorded training steps."""
    return (bool(attack.needs_encoder) and not attack.needs_messages and not attack.required_messages(phase)
            and attack.observation() is None)


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


PRIORS = {"aux": aux_prior, "simsiam": simsiam_prior, "same-attack": same_attack_prior}


def prior_searched(prior: str, attack: Any, epochs: int) -> Any:
    """What a tuned ``prior`` searches, over its own declared space (``space()``, not ``attack.search_space``):
    ``same-attack`` the attack itself, ``simsiam`` the A_SimSiam head as ``mc`` (linear, frozen, its epochs)."""
    return attack if prior == "same-attack" else ModelCompletion(ModelCompletionOptions(
        epochs=epochs, lr=HEAD_LR, weight_decay=HEAD_WEIGHT_DECAY, batch_size=HEAD_BATCH))


def tuned_prior(view: AdversaryView, *, prior: str, attack: Any, own_encoder: Encoder, epochs: int,
                generator: torch.Generator, budget: int, seed: int) -> dict[str, torch.Tensor]:
    """The prior tuned on the auxiliary labels like the attack (``attacks.search``) on the adversary's own encoder:
    :func:`prior_searched` searched over its own space."""
    alone = dataclasses.replace(view, encoder=own_encoder(), inbox=Inbox(owner=view.party), generator=generator)
    chosen = prior_searched(prior, attack, epochs)
    found = search(chosen, alone, budget=budget, seed=seed)
    inferences = found.inferences if isinstance(found, SearchResult) else chosen.infer(alone)
    return {name: inference.predictions for name, inference in inferences.items()}


_PRIORS: dict[str, dict[str, torch.Tensor]] = {}
_ENCODERS: dict[str, nn.Module] = {}


def encoder_key(prior: PriorPlan) -> str:
    """Hash of what the adversary's own encoder depends on: its local data (dataset and its data, ``data_of``; the
    partition's aligned/local draw, which party it is), the model, its pretraining's settings, the seed, and vflpriv's
    code."""
    cfg = prior.config
    payload = {
        "code": cache.code_version(), "prior": "simsiam-encoder", "dataset": cfg.dataset.model_dump(mode="json"),
        "data": data_of(cfg),
        "partition": cfg.partition.without_aux_features().model_dump(mode="json", exclude=LABEL_FIELDS),
        "model": cfg.model.model_dump(mode="json"), "options": prior.ssl, "seed": cfg.seed,
    }
    return config_hash(payload, 24)


def own_encoder(prior: PriorPlan, view: AdversaryView) -> nn.Module:
    """The encoder the adversary pretrains alone on its local samples (plain SimSiam, or the method's own
    pretraining): once per process and key, and through the cache across processes (its own seeded stream, so a
    cached encoder gives the numbers of a fresh one)."""
    cfg, key = prior.config, encoder_key(prior)
    if key not in _ENCODERS:

        def compute() -> list[nn.Module]:
            if prior.own:
                method = METHODS.get(cfg.method.name)
                found = method(method.Options.model_validate(cfg.method.options)).pretrain_alone(
                    view.spec, view.local_x, party=view.party, seed=generator(cfg.seed, "method").initial_seed(),
                    model=cfg.model, device=view.device)
                if found is None:
                    raise ProtocolError(f"method '{cfg.method.name}' has no pretraining a party can do alone")
                return [found]
            gen = generator(cfg.seed, "prior:encoder")
            return [local_ssl_encoder(view.spec, view.local_x, model_config=cfg.model,
                                      options=LocalOptions.model_validate(prior.ssl), generator=gen, device=view.device)]

        def skeleton() -> list[nn.Module]:  # the architecture compute() returns, so a cached encoder is reused
            if prior.own:
                method = METHODS.get(cfg.method.name)
                alone = method(method.Options.model_validate(cfg.method.options))
                return [alone.alone_skeleton(view.spec, party=view.party, model=cfg.model, device=view.device)]
            return [build_local_encoder(view.spec, cfg.model, generator=torch.Generator()).to(view.device)]

        (_ENCODERS[key],) = cache.cached_modules(key, skeleton, compute)
    return copy.deepcopy(_ENCODERS[key]).eval()


def ids_digest(ids: torch.Tensor) -> str:
    """A short hash of a set of sample ids: the prior's key names the samples it trained on and guessed (which the
    method's label setting, not only the partition, decides)."""
    return hashlib.sha256(ids.detach().cpu().long().numpy().tobytes()).hexdigest()[:16]


def prior_key(prior: PriorPlan, view: AdversaryView) -> str:
    """What the prior's predictions depend on: its kind and epochs, the seed, the adversary's data (``data_of``) and the
    samples it trains on and guesses, its encoder's pretraining, and only for ``same-attack`` the attack's own settings,
    revision and plugin code (``code_mark``) (so
    every attack of a training shares one ``simsiam`` or ``aux`` prior); the search budget where it is tuned."""
    cfg = prior.config
    attack_part = ({**cfg.attack.model_dump(mode="json", exclude={"phase"}), **code_mark(ATTACKS, cfg.attack.name)}
                   if prior.kind == "same-attack" else None)
    search_part = cfg.attack.model_dump(mode="json", include={"search_budget"}) if prior.tuned else None
    return json.dumps(
        [prior.kind, cfg.attack.prior_epochs, cfg.seed, attack_part, search_part, prior.ssl, data_of(cfg),
         *(c.model_dump(mode="json") for c in (cfg.dataset, cfg.partition.without_aux_features(), cfg.model)),
         {name: ids_digest(ids) for name, ids in [*view.target_ids.items(), ("aux", view.aux_ids)]}],
        sort_keys=True,
    )


def prior_predictions(prior: PriorPlan, view: AdversaryView, attack: Any,
                      truth: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The prior's predicted labels of every target set (the attack is compared with it on the targets it
    guessed: test samples, or the train samples whose gradients it read), computed once per key."""
    cfg = prior.config
    key = prior_key(prior, view)
    if key not in _PRIORS:

        def compute() -> dict[str, list[int]]:
            # same-attack draws the attack's own random stream: with the same encoder it guesses what the attack
            # guesses (leakage 0 by construction), and otherwise the paired difference is the encoders' alone
            stream = "attack" if prior.kind == "same-attack" else "prior:head"
            common = dict(attack=attack, own_encoder=lambda: own_encoder(prior, view), epochs=cfg.attack.prior_epochs,
                          generator=generator(cfg.seed, stream))
            predictions = (tuned_prior(view, prior=prior.kind, budget=cfg.attack.search_budget, seed=cfg.seed, **common)
                           if prior.tuned else PRIORS[prior.kind](view, model=cfg.model, **common))
            return {name: pred.cpu().tolist() for name, pred in predictions.items()}

        labels = cache.cached_labels(config_hash({"code": cache.code_version(), "prior": key}, 24), compute)
        _PRIORS[key] = {name: torch.tensor(v, dtype=torch.long) for name, v in labels.items()}
    found = _PRIORS[key]
    if any(found[name].numel() != y.numel() for name, y in truth.items()):
        raise ProtocolError("the cached prior's predictions do not match the target sets")
    return found
