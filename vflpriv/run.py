"""One run: scenario -> federation -> method -> attack -> scored record."""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass
from typing import Any

import torch

from vflpriv.adversary import AdversaryView, Inference
from vflpriv.scoring import best_threshold_accuracy, hungarian_accuracy, leak_auc
from vflpriv import cache, metrics
from vflpriv.components import parse_options
from vflpriv.config import RunConfig
from vflpriv.data.load import load_dataset
from vflpriv.engine import PRETRAIN, Channel, Federation, Inbox, make_parties
from vflpriv.errors import DivergedError, IncompatibleError
from vflpriv.methods.base import Method
from vflpriv.methods.finetune import predict
from vflpriv.models.training import apply_in_batches
from vflpriv.prior import PRIORS, reads_only_the_encoder
from vflpriv.records import RunRecord
from vflpriv.registry import ATTACKS, DEFENSES, METHODS
from vflpriv.scenario import Scenario, build_scenario
from vflpriv.seeding import generator


@dataclass
class Plan:
    """A run's resolved parts, built (and so validated) before any training starts."""

    config: RunConfig
    scenario: Scenario
    method: Method
    attack: Any
    defenses: list


def plan(config: RunConfig) -> Plan:
    """Resolve names, validate options and draw the scenario; raises VflprivError on bad input."""
    method_cls = METHODS.get(config.method.name)
    attack_cls = ATTACKS.get(config.attack.name)
    method = method_cls(parse_options(method_cls, config.method.options, where="method.options"))
    attack = attack_cls(parse_options(attack_cls, config.attack.options, where="attack.options"))
    device = torch.device(config.device)
    defenses = []
    for i, d in enumerate(config.defenses):
        cls = DEFENSES.get(d.name)
        if d.party >= config.partition.parties:
            raise IncompatibleError(f"defense {d.name}: party {d.party} does not exist (0..{config.partition.parties - 1})")
        defenses.append(cls(
            strength=cls.axis.identity if d.strength is None else d.strength, party=d.party, phase=d.phase, kinds=d.kinds,
            options=parse_options(cls, d.options, where=f"defenses[{i}].options"),
            generator=generator(config.seed, f"defense:{i}", device=device),
        ))
    dataset = load_dataset(config.dataset, parties=config.partition.parties)
    if attack.binary_only and dataset.num_classes != 2:
        raise IncompatibleError(
            f"attack '{config.attack.name}' needs a binary task; {dataset.name} has {dataset.num_classes} classes"
        )
    if config.attack.phase == "pretrain" and not method.pretrains:
        raise IncompatibleError(f"method '{config.method.name}' has no pretraining phase to attack; use --phase finetune")
    for d, defense in zip(config.defenses, defenses):
        if defense.binary_only and dataset.num_classes != 2:
            raise IncompatibleError(f"defense '{d.name}' needs a binary task; {dataset.name} has {dataset.num_classes} classes")
    sent = method.passive_receives
    for kind, phase in attack.required_messages(config.attack.phase):
        if (kind, phase) not in sent:
            raise IncompatibleError(
                f"attack '{config.attack.name}' needs the {kind} messages of the {phase} phase; "
                f"method '{config.method.name}' sends the adversary none"
            )
    if config.attack.prior == "same-attack" and not reads_only_the_encoder(attack, config.attack.phase):
        raise IncompatibleError(
            f"prior 'same-attack' reruns the attack without a federation, but '{config.attack.name}' reads "
            "messages received in training; use attack.prior=simsiam, aux or none"
        )
    scenario = build_scenario(dataset, config.partition, seed=config.seed)
    return Plan(config, scenario, method, attack, defenses)


def execute(p: Plan) -> RunRecord:
    """Train, attack and score one planned run, on one intra-op thread.

    Float reductions depend on the thread count, and training amplifies the difference; one thread
    per run makes the numbers independent of how a sweep is executed (``--jobs 1`` or ``--jobs N``).
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _execute(p)
    finally:
        torch.set_num_threads(before)


def _execute(p: Plan) -> RunRecord:
    cfg, scenario = p.config, p.scenario
    start = time.perf_counter()
    device = torch.device(cfg.device)
    ds = scenario.dataset
    adv = scenario.adversary
    inbox = Inbox(owner=adv, wanted={*p.attack.needs_messages, *p.attack.required_messages(cfg.attack.phase)})
    channel = Channel(p.defenses, inbox)
    fed = Federation(
        parties=make_parties(scenario, device), aligned=scenario.aligned.to(device), channel=channel,
        num_classes=ds.num_classes, model=cfg.model, finetune=cfg.finetune,
        generator=generator(cfg.seed, "method", device=device), device=device,
    )
    for defense in p.defenses:  # label defenses relabel now; Marvell keeps the active party's labels
        defense.bind(fed)
    pretrained = _pretrain(p, fed)
    snapshot = copy.deepcopy(pretrained[adv]) if pretrained is not None else None
    pretrain_mb = channel.meter.total_bytes("pretrain") / 1e6
    trained = p.method.finetune(fed, pretrained)
    y_test = ds.y_test.to(device)
    utility = metrics.utility(ds.metric, _finite(predict(fed, trained), "the federated model's test logits"), y_test)
    encoder = snapshot if cfg.attack.phase == "pretrain" else trained.bottoms[adv]
    view = adversary_view(fed, scenario, encoder, cfg.attack.phase, generator(cfg.seed, "attack", device=device))
    if view.encoder is not None:
        _finite(apply_in_batches(view.encoder, view.aux_x), f"the adversary's {cfg.attack.phase} encoder outputs")
    inferences = p.attack.infer(view)
    record = blank_record(cfg)
    record.utility, record.utility_metric = utility, ds.metric
    record.comm_mb, record.comm_messages = channel.meter.total_bytes() / 1e6, channel.meter.total_messages()
    record.comm_mb_pretrain = pretrain_mb
    swept = next((d for d, c in zip(p.defenses, cfg.defenses) if c.sweep), None)
    if swept is not None:
        record.strength_axis, record.strength_stronger = swept.axis.name, swept.axis.stronger
    truth = {"test": ds.y_test, "train": ds.y_train[view.target_ids["train"].cpu()]}
    _score_attack(record, inferences, truth)
    if cfg.attack.prior != "none":
        target = record.attack_target
        record.prior_accuracy = _prior_accuracy(cfg, view, p.attack, target, truth[target].to(device))
        record.leakage = record.attack_accuracy - record.prior_accuracy
    record.seconds = time.perf_counter() - start
    return record


def _finite(values: torch.Tensor, what: str) -> torch.Tensor:
    if not bool(torch.isfinite(values).all()):
        raise DivergedError(f"{what} are not finite (training diverged); the run is not scored")
    return values


def _pretrain(p: Plan, fed: Federation) -> list | None:
    """The method's pretraining, from the cache when an earlier run of the same key stored it.

    The cache is bypassed when the attack reads pretraining messages (they are not cached) or the
    method cannot rebuild its pretrained modules (no ``skeleton``).
    """
    if not p.method.pretrains:
        return None
    skeleton = getattr(p.method, "skeleton", None)
    if skeleton is None or any(phase == PRETRAIN for _, phase in fed.channel.inbox.wanted):
        return p.method.pretrain(fed)
    key = cache.pretrain_key(p.config, type(p.method))
    with cache.claim(key):  # a parallel run needing the same pretraining waits for this one, then loads it
        modules = skeleton(fed)
        if cache.load(key, modules, fed.channel.meter):
            return modules
        modules = p.method.pretrain(fed)
        cache.save(key, modules, fed.channel.meter)
    return modules


def run(config: RunConfig) -> RunRecord:
    return execute(plan(config))


def adversary_view(fed: Federation, scenario: Scenario, encoder, phase: str, gen: torch.Generator) -> AdversaryView:
    """The adversary's holdings: never its targets' labels, only its auxiliary ones."""
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
        inbox=fed.channel.inbox, generator=gen, device=fed.device,
    )


def _score_attack(record: RunRecord, inferences: dict[str, Inference], truth: dict[str, torch.Tensor]) -> None:
    primary = "test" if "test" in inferences else "train"
    record.attack_target = primary
    if "train" in inferences:
        record.attack_accuracy_train = metrics.accuracy(inferences["train"].predictions, truth["train"])
    inf, y = inferences[primary], truth[primary]
    record.attack_accuracy = metrics.accuracy(inf.predictions, y)
    if inf.scores is not None:
        record.attack_auc = metrics.auc(inf.scores, y)
        record.attack_tpr_at_1fpr = metrics.tpr_at_fpr(inf.scores, y, fpr=0.01)
    if inf.per_epoch:
        record.attack_accuracy_optimistic = max(metrics.accuracy(pred, y) for pred in inf.per_epoch)
    if inf.clusters is not None:
        record.attack_accuracy_hungarian = hungarian_accuracy(inf.clusters, y)
    if inf.batch_scores:
        record.attack_leak_auc = leak_auc(inf.batch_scores, y)
    if inf.scores is not None:
        record.attack_accuracy_best_threshold = best_threshold_accuracy(inf.scores, y)


_PRIORS: dict[str, float] = {}


def _prior_accuracy(cfg: RunConfig, view: AdversaryView, attack, target: str, y: torch.Tensor) -> float:
    """The prior's accuracy on the attack's own targets (test samples, or the train samples whose
    gradients gc clusters), so leakage compares like with like. It depends on data, partition, model,
    seed and target only (and, for ``same-attack``, the attack): computed once per process for a sweep."""
    prior = cfg.attack.prior
    attack_part = cfg.attack.model_dump(mode="json", exclude={"phase"}) if prior == "same-attack" else None
    key = json.dumps(
        [prior, cfg.attack.prior_epochs, cfg.seed, target, attack_part,
         *(c.model_dump(mode="json") for c in (cfg.dataset, cfg.partition, cfg.model))],
        sort_keys=True,
    )
    if key not in _PRIORS:
        predictions = PRIORS[prior](
            view, attack=attack, model=cfg.model, target=target, epochs=cfg.attack.prior_epochs,
            generator=generator(cfg.seed, "prior", device=view.device),
        )
        _PRIORS[key] = metrics.accuracy(predictions, y)
    return _PRIORS[key]


def blank_record(cfg: RunConfig) -> RunRecord:
    """A record naming the run (its key, method, dataset, attack, swept defense and strength, seed, config)."""
    swept = cfg.swept
    return RunRecord(
        key=cfg.key(), method=cfg.method.name, dataset=cfg.dataset.name, attack=cfg.attack.name,
        defense=swept.name if swept else "+".join(d.name for d in cfg.defenses) or "none",
        phase=cfg.attack.phase, strength=swept.strength if swept else 0.0, seed=cfg.seed,
        config=json.dumps(cfg.model_dump(mode="json"), sort_keys=True),
    )
