"""Attacks on a trained federation: the adversary's view, the attack's inference, its prior, the scores.

Each attack gets its own :class:`AdversaryView` of the one training (the inbox holds what any attack
of the training asked for); only the runner reads the targets' labels, to score what came back.
"""

from __future__ import annotations

import copy
import hashlib
import json

import torch
from torch import nn

from vflpriv import cache, metrics
from vflpriv.adversary import AdversaryHooks, AdversaryView, Inference, ObservedStep
from vflpriv.attacks.search import SearchResult, search
from vflpriv.config import RunConfig, config_hash
from vflpriv.engine import Federation
from vflpriv.errors import ProtocolError
from vflpriv.methods.local_ssl import LocalOptions, local_ssl_encoder
from vflpriv.methods.pretraining import SSLOptions
from vflpriv.methods.towers import build_local_encoder
from vflpriv.models.training import apply_in_batches, require_finite
from vflpriv.planning import prior_pretraining, search_space
from vflpriv.prior import PRIORS, TUNED_PRIORS, tuned_prior
from vflpriv.registry import METHODS
from vflpriv.records import RunRecord
from vflpriv.scenario import Scenario
from vflpriv.scoring import best_threshold_accuracy, hungarian_accuracy, leak_auc
from vflpriv.seeding import generator


def adversary_view(fed: Federation, scenario: Scenario, encoder, phase: str, gen: torch.Generator,
                   steps: tuple[ObservedStep, ...] = ()) -> AdversaryView:
    """The adversary's holdings: never its targets' labels, only its auxiliary ones (and the steps of its own
    training it recorded)."""
    party = fed.parties[scenario.adversary]
    aux = scenario.aux.to(fed.device)
    aux_y = scenario.dataset.y_train[scenario.aux].to(fed.device)
    train_ids = fed.labeled_aligned()
    train_ids = train_ids[~torch.isin(train_ids, aux)]  # aux labels are known, not inferred
    if encoder is not None:
        encoder = copy.deepcopy(encoder).eval().requires_grad_(False)
    return AdversaryView(
        party=party.index, phase=phase, num_classes=fed.num_classes, spec=party.spec, encoder=encoder,
        local_x=party.x_train[party.local_ids], aux_x=party.x_train[aux], aux_y=aux_y, aux_ids=aux,
        targets={"test": party.x_test, "train": party.x_train[train_ids]}, target_ids={"train": train_ids},
        inbox=fed.channel.inbox, generator=gen, device=fed.device, steps=steps, recipe=fed.finetune,
    )


def run_attack(attack, cfg: RunConfig, fed: Federation, scenario: Scenario, encoder, record: RunRecord) -> None:
    """Run ``attack`` from the adversary's view of ``encoder`` and score it (and its prior) into ``record``.

    Non-finite encoder outputs, attack outputs or prior outputs raise :class:`DivergedError`.
    """
    phase = cfg.attack.phase
    if attack.needs_encoder and encoder is None:
        raise ProtocolError(f"method '{cfg.method.name}' declares no {phase} snapshot of the adversary's encoder")
    adversary = getattr(fed.hooks, "adversary", None)
    steps = adversary.steps_for(attack.observation()) if isinstance(adversary, AdversaryHooks) else ()
    view = adversary_view(fed, scenario, encoder, phase, generator(cfg.seed, "attack", device=fed.device), steps)
    if view.encoder is not None:
        require_finite(apply_in_batches(view.encoder, view.aux_x), f"the adversary's {phase} encoder outputs")
    found = tuned(attack, cfg, view) if cfg.attack.tune else None
    inferences = found.inferences if isinstance(found, SearchResult) else attack.infer(view)
    ds = scenario.dataset
    truth = {"test": ds.y_test, "train": ds.y_train[view.target_ids["train"].cpu()]}
    covered = score_attack(record, inferences, truth)
    y = truth[record.attack_target][covered]
    record.attack_hits = hits(inferences[record.attack_target].predictions.cpu()[covered], y)
    if isinstance(found, SearchResult):
        record_search(record, found, truth)
    elif isinstance(found, str):
        record.notes = "; ".join(filter(None, [record.notes, f"attack not tuned: {found}"]))
    if cfg.attack.prior != "none":
        predicted = prior_predictions(cfg, view, attack, truth)[record.attack_target]
        record.prior_accuracy = metrics.accuracy(predicted[covered], y)
        record.prior_hits = hits(predicted[covered], y)
        record.leakage = record.attack_accuracy - record.prior_accuracy


def hits(predictions: torch.Tensor, truth: torch.Tensor) -> str:
    """'1' where a guess is right, '0' where wrong, one character per target (for per-sample paired tests)."""
    return "".join("1" if h else "0" for h in (predictions == truth).tolist())


def tuned(attack, cfg: RunConfig, view: AdversaryView) -> SearchResult | str:
    """The attack tuned on the adversary's auxiliary labels (``attacks.search``), trials cached per training."""
    a = cfg.attack
    key = json.dumps([cfg.training_key(), a.name, a.phase, attack.options.model_dump(mode="json")], sort_keys=True)
    return search(attack, view, budget=a.search_budget, seed=cfg.seed, key=key,
                  space=search_space(attack, a.search_space))


def record_search(record: RunRecord, found: SearchResult, truth: dict[str, torch.Tensor]) -> None:
    """The search's choice, its trials, and the oracle: the best accuracy on the targets' labels of anything it
    trained (every trial and the refit), an upper bound beside the honestly selected ``attack_accuracy``."""
    y = truth[record.attack_target]
    best = record.attack_accuracy
    for trial in found.trials:
        inf = trial.inferences.get(record.attack_target)
        if inf is not None:
            on = _covered(inf, y.numel())
            best = max(best, metrics.accuracy(inf.predictions[on], y[on]))
    record.attack_accuracy_oracle = best
    record.attack_selected = json.dumps(found.selected, sort_keys=True)
    record.attack_trials = json.dumps({"how": found.how, "trials": [t.summary() for t in found.trials]})


def prior_alone(attack, cfg: RunConfig, fed: Federation, scenario: Scenario) -> float:
    """The prior's test accuracy when there is no federation to attack (a non-federated method)."""
    view = adversary_view(fed, scenario, None, cfg.attack.phase, generator(cfg.seed, "attack", device=fed.device))
    ds = scenario.dataset
    truth = {"test": ds.y_test, "train": ds.y_train[view.target_ids["train"].cpu()]}
    return metrics.accuracy(prior_predictions(cfg, view, attack, truth)["test"], truth["test"])


def _covered(inference: Inference, n: int) -> torch.Tensor:
    """The positions of a target set an inference guesses (all of them unless it says otherwise)."""
    if inference.covered is None:
        return torch.ones(n, dtype=torch.bool)
    covered = inference.covered.bool().cpu()
    if covered.shape != (n,) or not bool(covered.any()):
        raise ProtocolError(f"the attack's covered mask must be {n} booleans with at least one true")
    return covered


def score_attack(record: RunRecord, inferences: dict[str, Inference], truth: dict[str, torch.Tensor]) -> torch.Tensor:
    """Score the inferences into ``record`` on the targets they cover; returns that mask of the primary set."""
    primary = "test" if "test" in inferences else "train"
    record.attack_target = primary
    for name, inf in inferences.items():
        if inf.scores is not None:
            require_finite(inf.scores, f"the attack's scores of its {name} targets")
    if "train" in inferences:
        on = _covered(inferences["train"], truth["train"].numel())
        record.attack_accuracy_train = metrics.accuracy(inferences["train"].predictions.cpu()[on], truth["train"][on])
    inf, y = inferences[primary], truth[primary]
    covered = _covered(inf, y.numel())
    record.n_targets = int(covered.sum())
    predictions, y = inf.predictions.cpu()[covered], y[covered]
    record.attack_accuracy = metrics.accuracy(predictions, y)
    if inf.scores is not None:
        scores = inf.scores.cpu()[covered]
        record.attack_auc = metrics.auc(scores, y)
        record.attack_tpr_at_1fpr = metrics.tpr_at_fpr(scores, y, fpr=0.01)
        record.attack_accuracy_best_threshold = best_threshold_accuracy(scores, y)
    if inf.per_epoch:
        record.attack_accuracy_optimistic = max(metrics.accuracy(pred.cpu()[covered], y) for pred in inf.per_epoch)
    if inf.clusters is not None:
        record.attack_accuracy_hungarian = hungarian_accuracy(inf.clusters.cpu()[covered], y)
    if inf.batch_scores:
        record.attack_leak_auc = leak_auc(inf.batch_scores, truth[primary])
    return covered


_PRIORS: dict[str, dict[str, torch.Tensor]] = {}
_ENCODERS: dict[str, nn.Module] = {}


#: What the adversary's own SimSiam pretraining takes from an SSL method it is compared with.
PRIOR_FROM_METHOD = ("batch_size", "lr", "lr_per_256", "optimizer", "weight_decay", "cosine", "grad_clip",
                     "augment", "corruption_rate", "clean_view", "crop_scale", "flip",
                     "color_jitter", "jitter_p", "blur_sigma", "blur_p")


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


def own_encoder(cfg: RunConfig, view: AdversaryView) -> nn.Module:
    """The encoder the adversary pretrains alone on its local samples (``attack.prior_ssl``: plain SimSiam, or the
    method's own pretraining, ``Method.pretrain_alone``): once per process and key, and through the pretraining
    cache across processes (its own seeded stream, so a cached encoder gives the numbers of a fresh one)."""
    own = prior_pretraining(cfg.method.name, cfg.attack.prior_ssl) == "own"
    options = {"own": own_pretraining(cfg)} if own else prior_options(cfg)
    key = cache.prior_key(cfg, options)
    if key not in _ENCODERS:

        def compute() -> list[nn.Module]:
            if own:
                method = METHODS.get(cfg.method.name)
                found = method(method.Options.model_validate(cfg.method.options)).pretrain_alone(
                    view.spec, view.local_x, party=view.party, seed=generator(cfg.seed, "method").initial_seed(),
                    model=cfg.model, device=view.device)
                if found is None:
                    raise ProtocolError(f"method '{cfg.method.name}' has no pretraining a party can do alone")
                return [found]
            gen = generator(cfg.seed, "prior:encoder", device=view.device)
            return [local_ssl_encoder(view.spec, view.local_x, model_config=cfg.model,
                                      options=LocalOptions.model_validate(options), generator=gen, device=view.device)]

        def skeleton() -> list[nn.Module]:
            return [build_local_encoder(view.spec, cfg.model, generator=torch.Generator()).to(view.device)]

        (_ENCODERS[key],) = cache.cached_modules(key, skeleton, compute)
    return copy.deepcopy(_ENCODERS[key]).eval()


def own_pretraining(cfg: RunConfig) -> list:
    """What the ``prior_ssl=own`` encoder depends on beyond the data: the method and its options."""
    return [cfg.method.name, cfg.method.model_dump(mode="json")]


def ids_digest(ids: torch.Tensor) -> str:
    """A short hash of a set of sample ids: the prior's key names the samples it trained on and guessed (which the
    method's label setting, not only the partition, decides)."""
    return hashlib.sha256(ids.detach().cpu().long().numpy().tobytes()).hexdigest()[:16]


def prior_predictions(cfg: RunConfig, view: AdversaryView, attack, truth: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The prior's predicted labels of every target set (the attack is compared with it on the targets it
    guessed: test samples, or the train samples whose gradients it read). It depends on data, partition, model
    and seed only (and, for ``same-attack``, the attack): computed once per key, however many attacks, runs and
    processes ask (kept in this process, and in the cache for the other processes of a sweep)."""
    prior = cfg.attack.prior
    attack_part = cfg.attack.model_dump(mode="json", exclude={"phase"}) if prior == "same-attack" else None
    tune = cfg.attack.tune and prior in TUNED_PRIORS
    search_part = cfg.attack.model_dump(mode="json", include={"search_budget"}) if tune else None
    key = json.dumps(
        [prior, cfg.attack.prior_epochs, cfg.seed, attack_part, search_part, prior_options(cfg),
         own_pretraining(cfg) if prior_pretraining(cfg.method.name, cfg.attack.prior_ssl) == "own" else None,
         *(c.model_dump(mode="json") for c in (cfg.dataset, cfg.partition, cfg.model)),
         {name: ids_digest(ids) for name, ids in [*view.target_ids.items(), ("aux", view.aux_ids)]}],
        sort_keys=True,
    )
    if key not in _PRIORS:

        def compute() -> dict[str, list[int]]:
            # same-attack draws the attack's own random stream: with the same encoder it guesses what the attack
            # guesses (leakage 0 by construction), and otherwise the paired difference is the encoders' alone
            stream = "attack" if prior == "same-attack" else "prior:head"
            common = dict(attack=attack, own_encoder=lambda: own_encoder(cfg, view), epochs=cfg.attack.prior_epochs,
                          generator=generator(cfg.seed, stream, device=view.device))
            predictions = (tuned_prior(view, prior=prior, budget=cfg.attack.search_budget, seed=cfg.seed, **common)
                           if tune else PRIORS[prior](view, model=cfg.model, **common))
            return {name: pred.cpu().tolist() for name, pred in predictions.items()}

        labels = cache.cached_labels(config_hash({"code": cache.code_version(), "prior": key}, 24), compute)
        _PRIORS[key] = {name: torch.tensor(v, dtype=torch.long) for name, v in labels.items()}
    found = _PRIORS[key]
    if any(found[name].numel() != y.numel() for name, y in truth.items()):
        raise ProtocolError("the cached prior's predictions do not match the target sets")
    return found
