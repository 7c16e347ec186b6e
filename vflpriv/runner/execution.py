"""One training, then every planned attack on it: scenario -> federation -> method -> attacks -> records.

The federation is trained once per (method, defenses with strengths, seed); each attack then reads
only its adversary view of that one training and yields one record. A training whose model outputs are
not finite fails every record with the reason; an attack or prior that diverges fails its own record.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from vflpriv.common import metrics
from vflpriv.common.errors import (ChannelViolation, DivergedError, VflprivError, class_named, exception_text,
                                   type_path)
from vflpriv.common.secret_kinds import FEATURES, LABELS
from vflpriv.common.seeding import generator
from vflpriv.config.keys import config_hash, loaded_code, plugin_code
from vflpriv.config.registry import DEFENSES
from vflpriv.config.schema import LABEL_FIELDS, RunConfig, TrainingConfig
from vflpriv.data.load import data_of
from vflpriv.defenses.declarations import declared_secrets
from vflpriv.defenses.noise import claim_notes
from vflpriv.engine import (
    FINETUNE,
    INFERENCE,
    PRETRAIN,
    Channel,
    CombinedHooks,
    DefenseChain,
    Federation,
    Inbox,
    TrainingHooks,
    make_parties,
)
from vflpriv.engine.adversary import AdversaryHooks
from vflpriv.methods.base import Method, own_code, pretraining_reads_labels
from vflpriv.methods.finetune import Trained
from vflpriv.models.allocator import reuse_freed_memory
from vflpriv.models.training import require_finite
from vflpriv.runner.accountants import accounting_of, recounted
from vflpriv.runner.attacking import prior_alone, run_attack
from vflpriv.runner.auditing import bind_auditor, score_auditor
from vflpriv.runner.claims import claiming, composed, judged, record_claims, withheld
from vflpriv.runner.feature_attacking import run_feature_attack
from vflpriv.runner.handed import changed_in_place, tensors_digest
from vflpriv.runner.naming import named
from vflpriv.runner.planning import Plan, plan
from vflpriv.store import cache
from vflpriv.store.secrets import canary_key, fingerprint
from vflpriv.store.records import FAILED, NOT_APPLICABLE, RunRecord


@dataclass
class TrainedFederation:
    """A finished training: the federation (channel, meter, inbox), the pretraining snapshot, the model."""

    fed: Federation
    snapshot: nn.Module | None
    trained: Trained
    utility: float
    metric: str
    seconds: float
    notes: list[str] = field(default_factory=list)
    #: With ``finetune.curve``: per finetuning epoch, [epoch, MB sent so far, test utility] and, with
    #: ``finetune.validation``, the validation utility (:class:`UtilityCurve`).
    curve: list[list[float]] = field(default_factory=list)
    #: With ``finetune.validation``: the trained model's utility on the active party's validation rows.
    utility_val: float = float("nan")

    @property
    def utility_optimistic(self) -> float:
        """The best test utility over the finetuning epochs and the final model: what the paper reports (its epoch
        picked on the test set), so optimistic by name; NaN without the curve."""
        return max([self.utility, *(point[2] for point in self.curve)]) if self.curve else float("nan")

    def encoder(self, phase: str, party: int) -> nn.Module | None:
        """The adversary's snapshot of ``phase``: its pretrained encoder, or its finetuned bottom model."""
        return self.snapshot if phase == PRETRAIN else self.trained.bottoms[party]


def execute(p: Plan) -> list[RunRecord]:
    """Train once and run every attack of ``p`` on one thread: torch's intra-op pool and every native pool the
    process loaded (OpenBLAS, MKL, OpenMP: scikit-learn's k-means and spectral clustering, scipy's solvers).

    Float reductions depend on the thread count, and training amplifies the difference; one thread
    per training makes the numbers independent of how a sweep is executed (``--jobs 1`` or ``--jobs N``: loky
    workers start with one thread per pool, and the sweep's own process now runs its share like them). It is also
    faster: beside a busy worker, the process's two-thread OpenMP and OpenBLAS pools made gc's spectral clustering
    cost 2.6x the CPU seconds of one thread (spinning threads on shared cores).
    Freed tensor buffers are kept for reuse (``vflpriv.models.allocator``) in whatever process runs it.
    """
    from threadpoolctl import threadpool_limits

    reuse_freed_memory()
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(limits=1):
            return _execute(p)
    finally:
        torch.set_num_threads(before)


def run(configs: RunConfig | Sequence[RunConfig]) -> list[RunRecord]:
    return execute(plan(configs))


#: The most of an exception's text a record's error (or a protocol error) keeps: vflpriv's own whole, a plugin's
#: bounded (its ``__str__``, 1 MB say, was written into every record of its training).
ERROR_WIDTH = 4000


def _execute(p: Plan) -> list[RunRecord]:
    records = [blank_record(a.config) for a in p.attacks]
    swept = next((d for d, c in zip(p.defenses, p.config.defenses) if c.sweep), None)
    for record in records:
        record.num_classes, record.device = p.scenario.dataset.num_classes, str(p.device)
        record.data_fingerprint = data_of(p.config)
    try:
        result = train(p)
    except DivergedError as exc:
        for record in records:
            record.status, record.error = FAILED, exception_text(exc, ERROR_WIDTH)
        return records
    except ChannelViolation as exc:  # the method broke its declared protocol: named, with its class (a plugin's)
        raise ChannelViolation(f"{method_named(p)}: {exception_text(exc, ERROR_WIDTH)}") from None
    meter = result.fed.channel.meter
    traffic = json.dumps({"/".join(k): [meter.bytes[k], meter.messages[k]] for k in sorted(meter.messages)})
    under_attack = p.acting is not None
    judgement = judged(p.defenses, p.verdicts, p.made, recounted(p.config))  # each claim judged once
    result.notes += withheld(p.defenses, [c.name for c in p.config.defenses], judgement)
    result.notes += [f"{c.name}: {note}" for d, c, v in zip(p.defenses, p.config.defenses, judgement)
                     if not v.tampered and (note := d.notes())]
    result.notes += claim_notes(p.defenses, p.config.defenses, judgement)  # what each epsilon assumes of its noise
    label_epsilon, delta = composed(claiming(judgement, LABELS))  # basic composition: epsilons and deltas add
    delta = 0.0 if math.isnan(delta) else delta
    accounting = accounting_of(p.defenses, judgement, p.config)  # what a read recomputes the epsilons from
    if p.auditor is not None:
        score_auditor(records, p.config.finetune.auditor, p.auditor, p.scenario,
                      delta=p.audited.privacy_delta() if math.isnan(label_epsilon) else delta, shares=p.auditor_menu)
    inboxes = list(result.fed.channel.inboxes.values())
    received, spoiled = tensors_digest(inboxes), ""
    for a, record in zip(p.attacks, records):
        if swept is not None:  # where an option set it (dp-gaussian's target_epsilon), the strength it resolved to
            record.strength = swept.effective_strength
        record.utility, record.utility_metric = result.utility, result.metric
        record.comm_mb, record.comm_messages = meter.total_bytes() / 1e6, meter.total_messages()
        for phase in (PRETRAIN, FINETUNE, INFERENCE):
            setattr(record, f"comm_mb_{phase}", meter.total_bytes(phase) / 1e6)
            setattr(record, f"comm_messages_{phase}", meter.total_messages(phase))
        record.training_under_attack = under_attack
        unguarded = record_claims(record, judgement, p.defenses)
        record.epsilon_accounting = accounting
        record.traffic, record.train_seconds = traffic, result.seconds
        record.notes = "; ".join(result.notes + unguarded)  # the bound is at the parties the mechanism noised
        record.canary_key = p.scenario.canary_key
        record.canary_classes = int(p.scenario.canary_candidates.shape[1]) if record.canaries else 0
        record.utility_curve = json.dumps(result.curve) if result.curve else ""
        record.utility_val, record.utility_optimistic = result.utility_val, result.utility_optimistic
        if a.not_applicable:  # no federation to attack; the adversary's prior is still what it knows alone
            record.status, record.error = NOT_APPLICABLE, a.not_applicable
            ALONE[a.attack.secret](a, result, p.scenario, record)
            continue
        name = a.config.attack.name
        if spoiled:  # an earlier attack changed the messages this one would read
            record.status, record.error = FAILED, spoiled
            continue
        start = time.perf_counter()
        try:
            RUNS[a.attack.secret](a, result, p.scenario, record, delta=delta)
        except DivergedError as exc:
            record.status, record.error = FAILED, exception_text(exc, ERROR_WIDTH)
        except VflprivError:
            raise
        except Exception as exc:  # noqa: BLE001 - one attack's failure (a plugin's broken reply) keeps the others' runs
            record.status, record.error = FAILED, f"{class_named(exc)}: {exception_text(exc, ERROR_WIDTH)}"
        record.attack_seconds = time.perf_counter() - start
        if tensors_digest(inboxes) != received:
            if record.status != FAILED:
                what = "the messages it received, which every attack of the training reads"
                record.status, record.error = FAILED, f"ProtocolError: {changed_in_place(a.attack, name, what)}"
            spoiled = f"not run: attack '{name}' before it on this training changed in place the messages they both read"
    return records


def method_named(p: Plan) -> str:
    """The planned method as a protocol error names it: its registered name and its class (``errors.type_path``: no
    metaclass code of a plugin's runs)."""
    return f"method '{p.config.method.name}' ({type_path(type(p.method))})"


def _run_label_attack(a, result: TrainedFederation, scenario, record: RunRecord, *, delta: float) -> None:
    run_attack(a, result.fed, scenario, result.encoder(a.config.attack.phase, scenario.adversary), record, delta=delta)


def _run_feature_attack(a, result: TrainedFederation, scenario, record: RunRecord, *, delta: float) -> None:
    run_feature_attack(a, result.fed, scenario, result.trained, record)


def _label_prior_alone(a, result: TrainedFederation, scenario, record: RunRecord) -> None:
    if a.prior.kind != "none":
        record.prior_accuracy = prior_alone(a, result.fed, scenario)


def _nothing_alone(a, result: TrainedFederation, scenario, record: RunRecord) -> None:
    """A feature prior needs the targets' received rows to say which targets there are: none without a federation."""


#: How an attack on each secret runs on a trained federation, and what is recorded where there is none to attack.
RUNS = {LABELS: _run_label_attack, FEATURES: _run_feature_attack}
ALONE = {"labels": _label_prior_alone, "features": _nothing_alone}


def build_federation(p: Plan, *, transforms: list | None = None) -> Federation:
    """The planned parties, channel (defenses, meter, each adversary's inbox, the method's declared
    traffic) and settings, untrained; every defense bound to it. ``transforms`` replaces the defenses
    on the channel (the conformance check zeroes every payload this way)."""
    cfg, scenario = p.config, p.scenario
    inbox = Inbox(owner=scenario.adversary, wanted=set(p.wanted.get(scenario.adversary, ())))
    taps = [Inbox(owner=party, wanted=set(wanted)) for party, wanted in p.wanted.items() if party != scenario.adversary]
    channel = Channel(p.defenses if transforms is None else transforms, inbox, declared=p.method.sends, taps=taps)
    fed = Federation(
        parties=make_parties(scenario, p.device), aligned=scenario.aligned.to(p.device), channel=channel,
        num_classes=scenario.dataset.num_classes, model=cfg.model, finetune=cfg.finetune,
        generator=generator(cfg.seed, "method"), device=p.device,
        hooks=CombinedHooks(adversary_hooks(p), DefenseChain(p.defenses), p.auditor,
                            hidden=None if p.auditor is None else scenario.canaries.to(p.device)) if transforms is None
        else TrainingHooks(),
    )
    for defense in p.defenses if transforms is None else ():  # label defenses relabel now; Marvell keeps labels
        defense.bind(fed)
    if p.auditor is not None and transforms is None:
        bind_auditor(p.auditor, p.audited, fed, scenario)
    return fed


def adversary_hooks(p: Plan) -> TrainingHooks:
    """The adversary's hooks for this training: the steps its attacks observe, and the acting attack's behaviour;
    the honest default when no attack needs either."""
    attacks = [a.attack for a in p.attacks if not a.not_applicable]
    observations = [o for o in (a.observation() for a in attacks) if o is not None]
    if not observations and p.acting is None:
        return TrainingHooks()
    return AdversaryHooks(p.scenario.adversary, observations, p.acting.attack.behaviour() if p.acting else None)


def run_safely(runs: list[RunConfig]) -> list[RunRecord]:
    """Train once and run the attacks; an unexpected failure fails the training's records instead of the sweep."""
    try:
        return execute(plan(runs))
    except VflprivError:
        raise
    except Exception as exc:  # noqa: BLE001 - recorded, reported, retried on resume
        records = [blank_record(r) for r in runs]
        for record in records:
            record.status, record.error = FAILED, f"{class_named(exc)}: {exception_text(exc, ERROR_WIDTH)}"
        return records


def train(p: Plan) -> TrainedFederation:
    """Pretrain (cached) and finetune the planned federation; the test utility must be finite."""
    scenario = p.scenario
    start = time.perf_counter()
    fed = build_federation(p)
    notes: list[str] = []
    pretrained = _pretrain(p, fed, notes)
    attacked = {a.config.attack.phase for a in p.attacks}
    snapshot = copy.deepcopy(pretrained[scenario.adversary]) if pretrained is not None and PRETRAIN in attacked else None
    ds = scenario.dataset
    truth = ds.y_test.to(p.device)
    curve = UtilityCurve(p, truth) if p.config.finetune.curve else None
    fed.monitor = curve
    trained = p.method.finetune(fed, pretrained)
    fed.monitor = None
    logits = require_finite(p.method.predict(fed, trained), "the federated model's test logits")
    utility = metrics.utility(ds.metric, logits, truth)
    return TrainedFederation(fed, snapshot, trained, utility, ds.metric, time.perf_counter() - start, notes,
                             curve.points if curve else [], validation_utility(p.method, ds.metric, fed, trained))


def validation_utility(method, metric: str, fed: Federation, trained: Trained) -> float:
    """The model's utility on the active party's validation rows (``finetune.validation``; their embeddings are sent
    as at inference), NaN without them."""
    active = fed.active
    if active.validation_ids.numel() == 0:
        return float("nan")
    logits = require_finite(method.predict(fed, trained, ids=active.validation_ids), "the validation logits")
    return metrics.utility(metric, logits, active.validation_labels)


class UtilityCurve:
    """The ``finetune.curve`` monitor (``Federation.monitor``): at each finetuning epoch's end, the test utility of
    the model as it stands (the method's own split inference, muted) and the MB the training has sent so far
    (pretraining included, inference excluded): paper 003 reads the MB to reach a target accuracy off it; with
    ``finetune.validation``, the validation utility too (an epoch is chosen on it, not on the test set)."""

    def __init__(self, p: Plan, truth: torch.Tensor):
        self.method, self.metric, self.truth = p.method, p.scenario.dataset.metric, truth
        self.points: list[list[float]] = []

    def __call__(self, fed: Federation, epoch: int, bottoms: list[nn.Module], top: nn.Module) -> None:
        trained = Trained(bottoms, top)
        utility = metrics.utility(self.metric, self.method.predict(fed, trained), self.truth)
        meter = fed.channel.meter
        sent = (meter.total_bytes(PRETRAIN) + meter.total_bytes(FINETUNE)) / 1e6
        val = validation_utility(self.method, self.metric, fed, trained)
        self.points.append([epoch, sent, utility, *([] if math.isnan(val) else [val])])


def _pretrain(p: Plan, fed: Federation, notes: list[str]) -> list | None:
    """The method's pretraining, from the cache when an earlier run of the same key stored it.

    The cache is bypassed when an attack reads pretraining messages (they are not cached) or the
    method cannot rebuild its pretrained modules (no ``skeleton``).
    """
    if not p.method.pretrains:
        return None
    skeleton = getattr(p.method, "skeleton", None)
    if skeleton is None or any(phase == PRETRAIN for inbox in fed.channel.inboxes.values() for _, phase in inbox.wanted):
        return p.method.pretrain(fed)
    key = pretrain_key(p.config, p.method)
    return cache.cached_modules(key, lambda: skeleton(fed), lambda: p.method.pretrain(fed),
                                meter=fed.channel.meter, notes=notes)


def _method_code(method: type) -> str:
    """A digest of the method's source file; a class without one (a notebook's, ``python -c``'s, a zip's): of its code
    as loaded (:func:`vflpriv.config.keys.loaded_code`)."""
    try:
        return hashlib.sha256(Path(inspect.getfile(method)).read_bytes()).hexdigest()[:16]
    except (OSError, TypeError):
        return loaded_code(method)


def pretrain_key(config: TrainingConfig, method: Method | type) -> str:
    """Hash of what pretraining can depend on: config parts, the data (``data_of``), the method's and vflpriv's code,
    and a plugin defense's among its defenses (``plugin_code``: an edited one pretrains anew, as its runs are).
    A pretraining reading no labels is shared across label budgets; one reading them is keyed by the label budget and
    every label defense (label DP changes the labels of every phase), as is, fail closed, a method with code of its own
    without ``label_uses`` declared beside it (``own_code``; ``feature_uses``: the feature defenses; review eps F1)."""
    cls = method if isinstance(method, type) else type(method)
    reads_labels = pretraining_reads_labels(method)
    reads_features = bool(own_code(method, "feature_uses"))
    payload = {
        "code": cache.code_version(),
        "method_code": _method_code(cls),
        "method_class": f"{cls.__module__}.{cls.__qualname__}",
        "dataset": config.dataset.model_dump(mode="json"), "data": data_of(config),
        "partition": config.partition.without_aux_features().model_dump(
            mode="json", exclude=None if reads_labels else LABEL_FIELDS),
        "model": config.model.model_dump(mode="json"),
        "method": config.method.model_dump(mode="json"),
        "defenses": [{**d.model_dump(mode="json", exclude={"sweep"}), **plugin_code(DEFENSES, d.name)}
                     for d in config.defenses
                     if d.phase == PRETRAIN or (reads_labels and "labels" in DEFENSES.get(d.name).supported_kinds)
                     or (reads_features and "features" in declared_secrets(DEFENSES.get(d.name)))],
        "seed": config.seed,
        # a pretraining that reads labels reads the canaries' too, drawn with the canary key
        **({"canary_key": fingerprint(canary_key())} if reads_labels and config.partition.canaries else {}),
    }
    return config_hash(payload, 24)


def blank_record(cfg: RunConfig) -> RunRecord:
    """A record naming the run (its keys, and what ``naming.named`` derives from its settings), with its config."""
    return RunRecord(key=cfg.key(), training_key=cfg.training_key(), config=cfg.recorded(), **named(cfg))
