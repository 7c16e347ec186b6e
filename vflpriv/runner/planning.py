"""Planning: resolve every name and validate every setting of a training and its attacks, before any
training starts. Whatever cannot work, or would silently do nothing, is refused here with one
:class:`VflprivError` line naming the problem and the valid choices. The defenses are planned in
:mod:`vflpriv.runner.defense_planning`.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from pydantic import ValidationError

from vflpriv.attacks.search import grid, tries, with_overrides
from vflpriv.common.empirical_epsilon import KEEP
from vflpriv.common.errors import ConfigError, IncompatibleError, UnfitOptionsError, class_named
from vflpriv.common.secret_kinds import FEATURES, LABELS
from vflpriv.config.options import CANDIDATE
from vflpriv.config.parse import check_space_values, parse_options
from vflpriv.config.registry import ATTACKS, METHODS
from vflpriv.config.schema import RunConfig, TrainingConfig
from vflpriv.data.base import VerticalDataset
from vflpriv.data.load import load_dataset
from vflpriv.data.scenario import Scenario, build_scenario, known_advice, known_features
from vflpriv.engine import EPOCH_END
from vflpriv.methods.base import Method, pretraining_reads_labels
from vflpriv.models.encoders import encoder_arch
from vflpriv.runner.adversaries import READS, Adversary, resolve
from vflpriv.runner.auditing import auditor_menu, check_auditor, plan_auditor
from vflpriv.common.components import built
from vflpriv.common.declarations import vflpriv_own
from vflpriv.runner.defense_planning import plan_defenses
from vflpriv.runner.feature_prior import FeaturePriorPlan, plan_feature_prior
from vflpriv.runner.prior import TUNED_PRIORS, PriorPlan, plan_prior, prior_searched
from vflpriv.store import cache


@dataclass
class AttackPlan:
    """One attack on the planned training: its prior, its search space when it is tuned (``space``), who runs it
    against whom and what its inbox keeps (``adversary``), a feature attack's known samples (``known``: its own
    ``partition.aux_features``, which the training does not read); ``not_applicable`` gives the reason it is recorded
    as n/a."""

    config: RunConfig
    attack: Any
    prior: PriorPlan | FeaturePriorPlan
    space: dict[str, tuple] | None = None
    not_applicable: str = ""
    adversary: Adversary | None = None
    known: torch.Tensor | None = None


@dataclass
class Plan:
    """A training's resolved parts and the attacks evaluated on it, all validated: the run reads it, never asks
    the planner again. ``acting``: the attack that acts during this training, if any (its runs have a training of
    their own); ``wanted``: per receiver (an adversary: a party index or ``SERVER``), the (kind, phase) pairs its
    inbox keeps, what any of the attacks it runs reads; ``auditor``: the auditor of ``audited`` (a defense of
    ``defenses``) the training runs with, if any, and ``auditor_menu`` the abstention menu its guesses are scored
    with (read here, before training)."""

    config: TrainingConfig
    scenario: Scenario
    method: Method
    defenses: list
    device: torch.device
    attacks: list[AttackPlan] = field(default_factory=list)
    acting: AttackPlan | None = None
    wanted: dict[int, set[tuple[str, str]]] = field(default_factory=dict)
    auditor: Any = None
    audited: Any = None
    auditor_menu: tuple[float, ...] = KEEP
    #: The planner's verdict on each defense's claim (``uncovered`` as planned), kept where the defense's own code
    #: does not write it (review l10 2; a table keyed by the defense went through its own ``__hash__``: l11 2).
    verdicts: tuple[str, ...] = ()
    #: The types of each defense's data as its construction left them (``claims.made_types``): another plugin's code
    #: writing into a DP defense's data voids its claim when the run is recorded (review l12 2).
    made: tuple[dict, ...] = ()


def available_devices() -> list[str]:
    devices = ["cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if torch.backends.mps.is_available():
        devices.append("mps")
    return devices


def resolve_device(name: str) -> torch.device:
    """``name`` as a torch device that exists on this machine, or a ConfigError listing those that do."""
    valid = ", ".join(available_devices())
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise ConfigError(f"unknown device '{name}'; valid devices here: {valid}") from None
    if device.type == "cpu":
        if device.index not in (None, 0):  # torch accepts cpu:1 and runs on the one CPU device: refused, not renamed
            raise ConfigError(f"device '{name}': the CPU has no index (torch runs every cpu:N on the same device); "
                              f"use cpu; valid devices here: {valid}")
        return torch.device("cpu")
    available = {"cuda": torch.cuda.is_available() and (device.index or 0) < torch.cuda.device_count(),
                 "mps": torch.backends.mps.is_available()}.get(device.type, False)
    if not available:
        raise ConfigError(f"device '{name}' is not available on this machine; valid devices here: {valid}")
    return device


def plan(runs: RunConfig | Sequence[RunConfig]) -> Plan:
    """Plan one training and every attack of ``runs`` (which must share one training)."""
    runs = [runs] if isinstance(runs, RunConfig) else list(runs)
    keys = {r.training_key() for r in runs}
    if len(keys) != 1:
        raise ValueError(f"plan() takes runs of one training, got {len(keys)} trainings")
    p = plan_training(runs[0])
    p.attacks = [plan_attack(run, p) for run in runs]
    applicable = [a for a in p.attacks if not a.not_applicable]
    p.acting = next((a for a in applicable if a.attack.acts), None)
    for a in applicable:
        p.wanted.setdefault(a.adversary.party, set()).update(a.adversary.reads)
    return p


def plan_training(config: TrainingConfig) -> Plan:
    device = resolve_device(config.device)
    method_cls = METHODS.get(config.method.name)
    options = parse_options(method_cls, config.method.options, where="method.options")
    method = built("method", config.method.name, lambda: method_cls(options))
    cache.check_writable()  # every run may cache (pretraining, the adversary's prior, labels)
    _check_finetune_loop(config, method)
    if config.partition.canaries and not method.federated:
        raise IncompatibleError(f"partition.canaries: method '{config.method.name}' is not federated, so no adversary "
                                "guesses the canaries; remove them")
    dataset = _dataset(config)
    if config.partition.canaries and dataset.num_classes < 2:  # a label drawn from one class is no secret
        raise IncompatibleError(f"partition.canaries: {dataset.name} has {dataset.num_classes} class, so a canary's "
                                "random label is no secret and no attack can be scored on it; remove them")
    _check_model(config, dataset)
    defenses, made = plan_defenses(config, method, dataset, device)
    verdicts = tuple(d.uncovered for d in defenses)  # as planned, before any more of their code runs
    auditor, audited = plan_auditor(config, method, defenses)
    if auditor is not None:
        options = parse_options(auditor, config.finetune.auditor_options, where="finetune.auditor_options")
        auditor = built("auditor", config.finetune.auditor, lambda: auditor(options))
        check_auditor(auditor, config, method, classes=dataset.num_classes)
        menu = auditor_menu(auditor, config.finetune.auditor)
    scenario = build_scenario(dataset, config.partition, seed=config.seed,
                              active_labels_local=_active_labels_local(config, method),
                              validation=config.finetune.validation)
    return Plan(config.training(), scenario, method, defenses, device, auditor=auditor, audited=audited,
                verdicts=verdicts, made=made,
                auditor_menu=menu if auditor is not None else KEEP)


def _check_finetune_loop(config: TrainingConfig, method: Method) -> None:
    """``finetune.top`` and ``finetune.local_updates`` apply to methods that finetune with the shared loop;
    ``finetune.validation`` to methods whose predict scores given training rows."""
    supported, name, ft = method.supported(), config.method.name, config.finetune
    if method.top is not None and ft.top not in (method.top, type(ft).model_fields["top"].default):  # set, not read
        raise IncompatibleError(f"finetune.top={ft.top}: method '{name}' has its own top ({method.top}), so "
                                "finetune.top is not read; remove the setting")
    if method.top is None and f"top:{ft.top}" not in supported:
        tops = ", ".join(sorted(s.split(":")[1] for s in supported if s.startswith("top:")))
        raise IncompatibleError(f"finetune.top={ft.top}: method '{name}' trains its own classifier, not the shared "
                                f"loop's top; valid here: {tops}")
    if ft.top_depth and ft.top != "linear":
        raise IncompatibleError(f"finetune.top_depth={ft.top_depth} deepens the Linear top; finetune.top={ft.top} "
                                "is another (mlp is top_depth 1): use finetune.top=linear")
    if ft.top_depth and "top:mlp" not in supported:
        raise IncompatibleError(f"finetune.top_depth={ft.top_depth}: method '{name}' trains its own classifier, not the "
                                "shared loop's top; use 0")
    if ft.curve and EPOCH_END not in supported:
        raise IncompatibleError(f"finetune.curve: method '{name}' trains in a loop without the epoch-end measurement "
                                "point, so it has no learning curve; use false")
    if ft.validation and "ids" not in inspect.signature(method.predict).parameters:
        raise IncompatibleError(f"finetune.validation={ft.validation}: method '{name}' predicts on the test rows only "
                                "(its predict takes no ids), so nothing scores its validation rows; use 0")
    if ft.local_updates > 1 and "local-updates" not in supported:
        raise IncompatibleError(f"finetune.local_updates={ft.local_updates}: method '{name}' does not finetune with "
                                "the shared split-learning loop, so it has no exchanges to follow with local updates; "
                                "use 1")


def _dataset(config: TrainingConfig) -> VerticalDataset:
    """The dataset, after its files were found (one line naming what is missing and how to get it, whatever its
    loader would say) and a ``root`` refused where nothing reads one."""
    from vflpriv.data.catalog import DATASET_INFO, check_files  # imports every loader module: once per process

    name, root = config.dataset.name, config.dataset.root
    info = DATASET_INFO.get(name)
    if root is not None and info is not None and info.kind == "embedded":
        raise ConfigError(f"dataset.root is not used by {name} (it comes with scikit-learn); remove it")
    check_files(name, root)
    return load_dataset(config.dataset, parties=config.partition.parties)


def _check_model(config: TrainingConfig, dataset: VerticalDataset) -> None:
    for k, spec in enumerate(dataset.specs):
        if encoder_arch(spec, config.model) == "cnn" and spec.modality != "image":
            raise ConfigError(
                f"model.encoder=cnn needs image parties, but party {k} of {dataset.name} holds tabular "
                "features; use model.encoder=mlp or auto"
            )


def _active_labels_local(config: TrainingConfig, method: Method) -> bool:
    value = config.partition.active_labels_local
    if value is None:
        return method.default_active_labels_local
    if method.requires_active_labels_local and not value:
        raise IncompatibleError(
            f"method '{config.method.name}' needs partition.active_labels_local=true (the active party knows "
            "the labels of all its local samples: the VFLHLP setting); leave it unset or set it true"
        )
    return value


def search_space(attack: Any, given: dict[str, list]) -> dict[str, tuple]:
    """A tuned attack's space: its own, with the options ``attack.search_space`` names replaced."""
    return {**attack.space(), **{k: tuple(v) for k, v in given.items()}}


def check_search_space(cls: Any, attack: Any, run: RunConfig) -> None:
    """Refuse, before training, a search the attack cannot run: options it does not have, values they refuse, an
    attack with nothing to select on auxiliary labels, a space past the budget without Optuna installed; a plugin's
    every candidate of a grid search built as the search builds it (Optuna's are not known before: pairs only). A
    tuned prior's search, over its own space, is checked the same way."""
    cfg = run.attack
    given = cfg.search_space
    check_space_values(cls, cfg.name, given, base=cfg.options)
    if given and not attack.space():
        raise ConfigError(f"attack '{cfg.name}' cannot be tuned: {attack.untunable or 'it declares no search space'}")
    _check_grid(attack, search_space(attack, given), run, what=f"attack '{cfg.name}': its search space",
                where="attack.search_space")
    if attack.secret == LABELS and cfg.prior in TUNED_PRIORS:  # the prior's search: its own space (review var F1, F2)
        searched = prior_searched(cfg.prior, attack, cfg.prior_epochs)
        tuned = f"attack.prior={cfg.prior} (tuned on {'the attack' if searched is attack else 'mc'}'s own space)"
        _check_grid(searched, searched.space(), run, what=f"attack '{cfg.name}': {tuned}, which",
                    where=tuned, other=", or use attack.prior=aux or none")


def _check_grid(attack: Any, space: dict[str, tuple], run: RunConfig, *, what: str, where: str,
                other: str = "") -> None:
    """Refuse a grid search over ``space`` past the budget without Optuna, or with a candidate a plugin refuses."""
    cfg = run.attack
    candidates = grid(attack, space)  # the candidates the search will enumerate
    points = len(candidates)
    if points > cfg.search_budget and importlib.util.find_spec("optuna") is None:
        raise ConfigError(f"{what} has {points} candidates, more than attack.search_budget {cfg.search_budget}; such "
                          "a space is searched with Optuna: pip install 'vflpriv[search]', or raise "
                          f"attack.search_budget to the grid's size{other}")
    if points <= cfg.search_budget and not vflpriv_own(type(attack)):  # a plugin may refuse any combination (l7 4)
        for overrides, share in tries(attack, candidates):
            try:
                built("attack", cfg.name, lambda: with_overrides(attack, overrides, share))
            except ConfigError as exc:
                shown = ", ".join(f"{k}={v!r}" for k, v in overrides.items()) or "the options as given"
                at = f" at {share:g} of its {attack.budget_option}" if share < 1 else ""
                refused = exc.__cause__  # its Options' own validator: the refusal's message, as for pairs (F5)
                why = (f", which its options refuse ({refused.errors()[0]['msg'].removeprefix('Value error, ')})"
                       if isinstance(refused, ValidationError) and refused.title == class_named(attack.options)
                       else f": {exc}")
                raise ConfigError(f"{where}: the search would try {shown}{at}{why}") from refused


def plan_attack(run: RunConfig, p: Plan) -> AttackPlan:
    cfg, method, dataset = run.attack, p.method, p.scenario.dataset
    cls = ATTACKS.get(cfg.name)
    options = parse_options(cls, cfg.options, where="attack.options", context=CANDIDATE if cfg.tune else None)
    attack = built("attack", cfg.name, lambda: cls(options))
    adversary = resolve(run, attack, parties=dataset.parties)
    if not method.federated:
        return AttackPlan(run, attack, PRIOR_PLANS[attack.secret](run, attack), adversary=adversary,
                          not_applicable=f"method '{run.method.name}' is not federated: no message crosses parties, "
                                         "so there is no adversary view to attack")
    if attack.binary_only and dataset.num_classes != 2:
        raise IncompatibleError(
            f"attack '{cfg.name}' needs a binary task; {dataset.name} has {dataset.num_classes} classes"
        )
    if cfg.phase == "pretrain" and not method.pretrains:
        raise IncompatibleError(f"method '{run.method.name}' has no pretraining phase to attack; use --phase finetune")
    if (run.partition.canaries and cfg.phase == "pretrain" and not pretraining_reads_labels(method)
            and attack.secret == "labels"):
        raise IncompatibleError(f"partition.canaries: the pretraining of method '{run.method.name}' reads no labels, so "
                                "its snapshot holds nothing of a canary's label; attack the finetune phase, or remove "
                                "the canaries")
    if cfg.tune:  # before READS, whose checks of the data build the search's candidates
        check_search_space(cls, attack, run)
    adversary = READS[attack.secret](attack, run, method, adversary, dataset)
    missing = attack.hook_points() - method.supported()
    if missing:
        raise IncompatibleError(
            f"attack '{cfg.name}' needs the training loop's hook point(s) {', '.join(sorted(missing))} (it "
            f"{'acts' if attack.acts else 'observes'} during training); method '{run.method.name}' trains with a loop "
            "of its own that does not call them"
        )
    if attack.acts and cfg.phase != "finetune":
        raise IncompatibleError(f"attack '{cfg.name}' acts during finetuning; use attack.phase=finetune")
    space = search_space(attack, cfg.search_space) if cfg.tune else None
    declared = method.declared(run, num_classes=dataset.num_classes)
    fits = lambda a: a.incompatible(declared, num_classes=dataset.num_classes)  # noqa: E731
    if reason := fits(attack) or (attack.search_problem(cfg.search_space, fits, name=cfg.name) if cfg.tune else ""):
        raise (UnfitOptionsError if _users_options(cls, cfg, fits, reason) else IncompatibleError)(
            f"attack '{cfg.name}': {reason}")
    known_ids = None
    if attack.secret == "features":  # too few known samples failed (or silently did less) after the training
        needed, why = attack.known_needed(tuned=cfg.tune)
        known_ids = known_features(p.scenario, run.partition.aux_features)
        if (known := known_ids.numel()) < needed:
            unset = (" (partition.aux_features unset: 10% of the aligned samples, at most half of those the active "
                     "party trains on)") if run.partition.aux_features is None else ""
            advice = known_advice(p.scenario, needed, run.partition.aux_features, run.finetune.validation)
            raise IncompatibleError(f"attack '{cfg.name}': {why}; this partition leaves the adversary {known}{unset}; "
                                    f"{advice}")
    if run.partition.aux == 0 and attack.needs_aux:
        raise IncompatibleError(f"attack '{cfg.name}' needs the adversary's auxiliary labels; raise partition.aux above 0")
    return AttackPlan(run, attack, PRIOR_PLANS[attack.secret](run, attack), space, adversary=adversary,
                      known=known_ids)


def _users_options(cls: Any, cfg: Any, fits: Callable[[Any], str], reason: str) -> bool:
    """Whether the options ``cfg`` gives are why the attack does not fit: class ``cls`` with its default options
    ``fits`` where they do not; for a plugin that cannot start with its defaults, where the ``reason`` names an option
    the user gave or searched (review lo7 F2: otherwise an audit set it aside at rc 0; review l7 3: not any option)."""
    try:
        default = cls(cls.Options())
    except Exception:  # noqa: BLE001 - a plugin's own constructor
        return any(re.search(rf"(?<![\w.]){re.escape(name)}=", reason) for name in (*cfg.options, *cfg.search_space))
    return not fits(default)


#: How each secret's prior is planned (an attack's ``secret`` picks one).
PRIOR_PLANS: dict[str, Callable[[RunConfig, Any], Any]] = {LABELS: plan_prior, FEATURES: plan_feature_prior}


def refuse_unread_aux_features(count: int | None, attacks: Sequence[str]) -> None:
    """``partition.aux_features`` is what a feature attack knows of its victim: refused where none of ``attacks``
    infers features (a setting nothing reads; a label attack's keys leave it out)."""
    def infers_features(name: str) -> bool:
        return ATTACKS.get(name).secret == FEATURES

    if count is None or any(map(infers_features, attacks)):
        return
    ours = sorted(set(attacks))
    features = list(filter(infers_features, ATTACKS.names()))
    raise ConfigError(f"partition.aux_features={count} is set, but no attack here reads it ({', '.join(ours)} infer"
                      f"{'s' if len(ours) == 1 else ''} labels; the feature attacks do: {', '.join(features)}); "
                      "remove it, or add a feature attack")
