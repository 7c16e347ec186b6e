"""Planning a training's defenses: each one bound to the messages or training points it protects, and refused with
one :class:`VflprivError` line where the method never reaches it, it would protect nothing, or it cannot share a
training with another defense (:func:`plan_defenses`; ``planning.plan_training`` calls it)."""

from __future__ import annotations

import torch

from vflpriv.common.components import built
from vflpriv.common.errors import ConfigError, IncompatibleError, VflprivError
from vflpriv.config.parse import parse_options
from vflpriv.config.registry import DEFENSES, METHODS
from vflpriv.config.schema import TrainingConfig
from vflpriv.data.base import VerticalDataset
from vflpriv.defenses.base import LABELS, Protection
from vflpriv.defenses.declarations import declared_secrets
from vflpriv.defenses.noise import noise_stream
from vflpriv.engine import (
    ACTIVE_BACKWARD,
    ACTIVE_BATCH,
    DEFENSE_POINTS,
    EMBEDDING,
    PASSIVE_BACKWARD,
    PASSIVE_POINTS,
    PRETRAIN,
    PRETRAIN_PASSIVE_LOSS,
    SOFT_LABELS,
    SOFT_TARGETS,
    role,
)
from vflpriv.engine.roles import PASSIVE
from vflpriv.methods.base import Method
from vflpriv.runner.claims import accounting_class, foreign_accounting, made_types


def plan_defenses(config: TrainingConfig, method: Method, dataset: VerticalDataset, device: torch.device
                  ) -> tuple[list, tuple[dict, ...]]:
    """Every defense of ``config``, bound and checked against the method and against one another, and the types of
    each one's data as its construction left them (``claims.made_types``, before the next defense's code runs)."""
    first = [foreign_accounting(DEFENSES.get(c.name), c.name) for c in config.defenses]  # before any of their code runs
    defenses, made = [], []
    for i in range(len(config.defenses)):
        defenses.append(_defense(config, i, method, dataset, device))
        made.append(made_types(defenses[-1]))
    _check_secrets(defenses)
    _check_backward(config, defenses)
    _check_passive_backward(config, defenses)
    _check_label_readers(config, defenses)
    _check_soft_targets(config, defenses)
    _check_delta(config, defenses, rows=int(dataset.y_train.shape[0]))
    for i, (d, c) in enumerate(zip(defenses, config.defenses)):
        d.read_around = _read_around(config, defenses, i)
        d.uncovered = "; ".join(filter(None, [first[i] or foreign_accounting(d, c.name), d.covers(method),
                                              d.covers_data(dataset), d.read_around]))
        if d.uncovered and d.requested_claim():
            raise IncompatibleError(f"defense '{c.name}': {d.requested_claim()} asks for an epsilon its argument does not "
                                    f"cover in method '{config.method.name}' ({d.uncovered}); give a strength instead "
                                    "(the noise acts and no epsilon is recorded), or use another method")
    return defenses, tuple(made)


def _check_secrets(defenses: list) -> None:
    """Each defense's ``secrets``, its class's and the instance's, is a set of known secrets (review l6 L6)."""
    for d in defenses:
        declared_secrets(type(d))
        declared_secrets(d)


def _check_backward(config: TrainingConfig, defenses: list) -> None:
    """A defense that backpropagates the active party's per-sample losses itself (DP-SGD) owns its whole label
    computation: another defense at the active party's points (its batch, model, loss, gradient computation or
    predictions) would change what it clips and noises, and its argument would not hold; two cannot share one pass."""
    acting = [i for i, d in enumerate(defenses) if d.hook_points & DEFENSE_POINTS]
    own = [i for i in acting if ACTIVE_BACKWARD in defenses[i].hook_points]
    if own and len(acting) > 1:
        others = [config.defenses[i].name for i in acting if i != own[0]]
        raise IncompatibleError(f"defense '{config.defenses[own[0]].name}' backpropagates the active party's per-sample "
                                f"losses itself (DP-SGD); it cannot be combined with {', '.join(others)} at the active "
                                "party's training")


def _check_passive_backward(config: TrainingConfig, defenses: list) -> None:
    """A defense that computes a passive party's update itself (embedding-dp's DP-SGD on its bottom) bounds what its
    clipped per-sample gradients carry: another defense at that party's points in the same phase (a loss term, a
    wrapped bottom) would change what it clips, and its argument would not hold."""
    passive = [i for i, d in enumerate(defenses) if d.hook_points & PASSIVE_POINTS]
    for i in passive:
        d = defenses[i]
        probe = 1 if d.party == PASSIVE else d.party  # a party it protects
        if PASSIVE_BACKWARD not in d.hook_points or not d.passive_backpropagates(probe):
            continue
        others = [config.defenses[j].name for j in passive if j != i and defenses[j].phase == d.phase
                  and (defenses[j].party == d.party or PASSIVE in (defenses[j].party, d.party))]
        if others:
            raise IncompatibleError(f"defense '{config.defenses[i].name}' computes the passive party's update itself "
                                    f"(DP-SGD on its bottom); it cannot be combined with {', '.join(others)} at that "
                                    "party's points in the same phase")


def _check_label_readers(config: TrainingConfig, defenses: list) -> None:
    """A defense that backpropagates the active party's per-sample losses itself (DP-SGD) bounds only what passes its
    mechanism: a defense that reads the labels itself (``reads_labels``: Marvell's noise follows each batch's labels)
    releases them around it and is refused beside it, unless a label defense randomised the labels first (then it reads
    the randomised ones, a post-processing of that defense's mechanism, whose epsilon covers the whole training): one
    that claims an epsilon at its strength, and whose own code reads nothing else (review eps F2). Its own undeclared
    code voids its claim instead (:func:`_read_around`), so that it runs and records none."""
    own = [i for i, d in enumerate(defenses) if ACTIVE_BACKWARD in d.hook_points]
    randomised = any(LABELS in d.hook_points and not d.is_identity and not d.label_reads()
                     and not foreign_accounting(d, c.name)
                     and d.claimed_epsilon(d.strength, finetune=config.finetune, options=c.options) is not None
                     for d, c in zip(defenses, config.defenses))
    readers = [config.defenses[i].name for i, d in enumerate(defenses) if i not in own and d.label_reads()]
    if own and readers and not randomised:
        raise IncompatibleError(f"defense '{config.defenses[own[0]].name}' bounds only the label uses of its own "
                                f"mechanism, and {', '.join(readers)} reads the active party's labels around it; drop "
                                f"{readers[0]}, or randomise the labels first with a label defense (label-dp, alibi)")


def _check_delta(config: TrainingConfig, defenses: list, *, rows: int) -> None:
    """A claim's delta must be below 1/n, n the training rows (as many as the rows any claim is over, or more): at
    delta >= 1/n, publishing one random row's secret in the clear is (0, delta)-DP, so the epsilon says nothing."""
    for d, c in zip(defenses, config.defenses):
        if not d.is_identity and (delta := d.privacy_delta()) >= 1 / rows:
            default = getattr(type(d.options).model_fields.get("delta"), "default", None)
            too_large = f"the default delta {delta:g} is too large for {rows} training rows: " * (delta == default)
            raise ConfigError(f"defense '{c.name}': options.delta {delta:g} is not below 1/{rows} ({rows} training "
                              "rows, as many as any claim is over or more): no meaningful guarantee, as releasing one "
                              f"random row's secret in the clear meets it; {too_large}give a delta below "
                              f"{1 / rows:.3g}")


def _read_around(config: TrainingConfig, defenses: list, index: int) -> str:
    """Why defense ``index``'s claim does not hold for the training, or '': undeclared code of a secret it claims, in
    its own class too (a replaced mechanism, review eps2 G1), or another defense's feature reads (:func:`_reads`)."""
    d = defenses[index]
    if type(d).privacy_spent is Protection.privacy_spent:  # it claims nothing
        return ""
    why = [f"{config.defenses[j].name}: {'; '.join(reads)}" for j, other in enumerate(defenses)
           if (reads := [r for secret in sorted(declared_secrets(accounting_class(d)) | declared_secrets(d))
                         for r in _reads(other, secret, own=j == index)])]
    return ("; ".join(why) + f": around {config.defenses[index].name}'s mechanism, so its epsilon does not bound the "
            "training") if why else ""


def _reads(defense: Protection, secret: str, *, own: bool) -> tuple[str, ...]:
    """Why ``defense`` reads ``secret`` outside a claim on it: its undeclared code; for another defense, its declared
    feature reads too (a declared label read is refused or admitted by :func:`_check_label_readers`)."""
    return defense.feature_reads() if secret == "features" and not own else defense.undeclared_reads(secret)


def _check_soft_targets(config: TrainingConfig, defenses: list) -> None:
    """A defense that recomputes each sample's target from the model's outputs (``SOFT_TARGETS``: ALIBI's model prior)
    reads its own per-sample state by row id: a defense that mixes or replaces the batch's targets before it would be
    silently undone."""
    follow = [i for i, d in enumerate(defenses) if SOFT_TARGETS in d.hook_points]
    mixing = [config.defenses[i].name for i, d in enumerate(defenses) if ACTIVE_BATCH in d.hook_points]
    if follow and mixing:
        raise IncompatibleError(f"defense '{config.defenses[follow[0]].name}' recomputes each sample's target from the "
                                f"model's predictions, which would undo {', '.join(mixing)} on the batch's targets; use "
                                "its options.prior=uniform, or one of them")


def _sent(method: Method, sender: str, phase: str) -> set[str]:
    return {kind for who, kind, ph in method.sends if who == sender and ph == phase}


def message_kinds(cls, method: Method, *, party: int | None, phase: str, kinds: list[str] | None, name: str,
                  method_name: str) -> tuple[int | str, list[str] | None]:
    """The party a message defense protects and the kinds it protects (:func:`_defense`'s rule for unset ones; the
    tables name a configuration by them), or IncompatibleError where it would protect nothing the method sends."""
    labels = LABELS in cls.supported_kinds
    candidates = [party] if party is not None else [0] if labels or not method.federated else [0, PASSIVE]
    tried = []
    for candidate in candidates:
        sent = _sent(method, PASSIVE if candidate == PASSIVE else role(candidate), phase)
        chosen = kinds
        if chosen is None and not labels:
            chosen = sorted(set(cls.default_kinds_for(phase)) & sent) or sorted(set(cls.supported_kinds) & sent) or None
        wanted = set(chosen or cls.default_kinds_for(phase))
        if labels or not method.federated or wanted & sent:
            return candidate, chosen
        who = "the passive parties send" if candidate == PASSIVE else f"party {candidate} sends"
        tried.append(f"{who} {', '.join(sorted(sent)) or 'nothing'}")
    raise IncompatibleError(
        f"defense '{name}' protects {'/'.join(sorted(wanted))} messages in {phase}, but in method "
        f"'{method_name}' {' and '.join(tried)} there: it would change nothing"
    )


def unset_kinds(name: str, method: str, *, party: int | None, phase: str) -> list[str] | None:
    """The kinds message defense ``name`` protects in ``method``'s ``phase`` when none are given (what the tables
    name its configuration by); None for a defense of another kind, or one the planner refuses there."""
    cls = DEFENSES.get(name)
    if cls.hook_points & (DEFENSE_POINTS | PASSIVE_POINTS) or LABELS in cls.supported_kinds:
        return None
    try:  # a stored run's method may be a plugin not installed here
        plugin = METHODS.get(method)
        if not isinstance(getattr(plugin, "sends", None), (set, frozenset)):  # set per instance: unknown here
            return None
        return message_kinds(cls, plugin, party=party, phase=phase, kinds=None, name=name, method_name=method)[1]
    except VflprivError:
        return None


def _defense(config: TrainingConfig, index: int, method: Method, dataset: VerticalDataset, device: torch.device):
    """The defense, bound to the messages it protects. Unset ``party``: the active party, or every passive
    party when the active party sends nothing the defense protects in the phase; unset ``kinds``: the
    defense's defaults for the phase that the party sends, else the kinds it supports that the party sends.
    A defense that would protect nothing the method sends is refused (it would change no number)."""
    d = config.defenses[index]
    cls = DEFENSES.get(d.name)
    parties = config.partition.parties
    if d.party is not None and d.party >= parties:
        raise ConfigError(f"defense {d.name}: party {d.party} does not exist (0..{parties - 1})")
    if cls.binary_only and dataset.num_classes != 2:
        raise IncompatibleError(f"defense '{d.name}' needs a binary task; {dataset.name} has {dataset.num_classes} classes")
    reason = cls.incompatible(dataset=dataset)
    if reason:
        raise IncompatibleError(f"defense '{d.name}': {reason}")
    if cls.hook_points & PASSIVE_POINTS:
        return _passive_defense(config, index, cls, method, dataset)
    unsupported = sorted(set(d.kinds or ()) - set(cls.supported_kinds))
    if unsupported:
        raise ConfigError(f"defense '{d.name}' cannot protect {', '.join(unsupported)} messages; "
                          f"valid kinds: {', '.join(cls.supported_kinds)}")
    if {SOFT_LABELS, SOFT_TARGETS} & cls.hook_points - method.supported():
        raise IncompatibleError(f"defense '{d.name}' trains the active party on soft labels; method "
                                f"'{config.method.name}' trains with a loop of its own that takes class indices only")
    inside = cls.hook_points & DEFENSE_POINTS
    if inside:
        return _training_defense(config, index, cls, method, device)
    party, kinds = message_kinds(cls, method, party=d.party, phase=d.phase, kinds=d.kinds, name=d.name,
                                 method_name=config.method.name)
    options = parse_options(cls, d.options, where=f"defenses[{index}].options")
    return built("defense", d.name, lambda: cls(
        strength=cls.axis.identity if d.strength is None else d.strength, party=party, phase=d.phase, kinds=kinds,
        options=options, generator=noise_stream(config.seed, index, options), name=d.name,
    ))


def _training_defense(config: TrainingConfig, index: int, cls, method: Method, device: torch.device):
    """A defense inside the active party's finetuning computation: the method's training must call its hook points,
    it acts in finetuning for the active party, and its message part (if any) protects gradients the active party
    sends there."""
    d, name = config.defenses[index], config.defenses[index].name
    missing = sorted((cls.hook_points & DEFENSE_POINTS) - method.supported())
    if missing:
        raise IncompatibleError(
            f"defense '{name}' acts at {', '.join(missing)} inside the active party's training; method "
            f"'{config.method.name}' trains with a loop of its own that does not call that point")
    if d.phase != "finetune":
        raise IncompatibleError(f"defense '{name}' acts in finetuning, where the active party trains with its labels; "
                                f"the {d.phase} phase has no labels to protect: use phase finetune")
    if d.party not in (None, 0):
        raise ConfigError(f"defense '{name}' acts inside the active party's training: party must be 0")
    kinds = None
    if cls.supported_kinds:
        kinds = d.kinds or list(cls.default_kinds)
        sent = _sent(method, "active", "finetune")
        if not set(kinds) & sent:
            raise IncompatibleError(f"defense '{name}' also protects {'/'.join(kinds)} messages the active party sends "
                                    f"in finetuning; method '{config.method.name}' sends {', '.join(sorted(sent)) or 'none'}")
    elif d.kinds:
        raise ConfigError(f"defense '{name}' acts inside the active party's training, not on messages; remove kinds")
    options = parse_options(cls, d.options, where=f"defenses[{index}].options")
    return built("defense", name, lambda: cls(
        strength=cls.axis.identity if d.strength is None else d.strength, party=0, phase="finetune", kinds=kinds,
        options=options, generator=noise_stream(config.seed, index, options), name=name))


def _passive_defense(config: TrainingConfig, index: int, cls, method: Method, dataset: VerticalDataset):
    """A defense at a passive party's own points: in a phase it acts in, on a method that sends passive embeddings,
    whose training (pretraining, for that phase) calls its points; for a passive party (unset: every one) whose
    features its options can take (``victim_problem``)."""
    d, name, what = config.defenses[index], config.defenses[index].name, config.method.name
    if d.kinds:
        raise ConfigError(f"defense '{name}' acts at the passive party's own points, not on messages; remove kinds")
    if d.party == 0:
        raise ConfigError(f"defense '{name}' protects a passive party's features: party must be 1..{config.partition.parties - 1}, "
                          "or unset for every passive party")
    phases = getattr(cls, "phases", ("finetune",))  # a duck-typed plugin (not a PassiveDefense): finetuning's points
    if d.phase not in phases:
        reason = getattr(cls, "phase_reason", "")  # a plugin may give none: the valid phases are named either way
        raise IncompatibleError(f"defense '{name}' acts in {' and '.join(phases)} only{f': {reason}' if reason else ''}"
                                f"; use phase {' or '.join(phases)}")
    if not any(who == PASSIVE and kind == EMBEDDING for who, kind, _ in method.sends):
        raise IncompatibleError(f"defense '{name}' protects the embeddings a passive party sends; method '{what}' sends "
                                "none (no passive party's features leave it), so it would change nothing")
    if d.phase == PRETRAIN and not method.pretrains:
        raise IncompatibleError(f"defense '{name}': method '{what}' has no pretraining phase; use phase finetune")
    needed = cls.points_for(d.phase) if hasattr(cls, "points_for") else cls.hook_points
    missing = sorted(needed - method.supported())
    if missing:
        pretrain = "; it acts in pretraining too: use phase pretrain" if PRETRAIN in cls.phases and method.pretrains \
            and PRETRAIN_PASSIVE_LOSS in method.supported() else ""
        why = dict.fromkeys(method.absent_points.get(p, "trains there with a loop of its own that does not call that "
                                                        "point") for p in missing)
        raise IncompatibleError(f"defense '{name}' acts at {', '.join(missing)} in {d.phase}; method '{what}' "
                                f"{'; '.join(why)}{pretrain}")
    options = parse_options(cls, d.options, where=f"defenses[{index}].options")
    defense = built("defense", name, lambda: cls(
        strength=cls.axis.identity if d.strength is None else d.strength, party=PASSIVE if d.party is None else d.party,
        phase=d.phase, kinds=None, options=options, generator=noise_stream(config.seed, index, options), name=name))
    defense.called = cls.hook_points & method.supported()  # its optional points too, where the training calls them
    for party in range(1, config.partition.parties) if d.party is None else (d.party,):
        if reason := getattr(defense, "victim_problem", lambda *_: "")(party, dataset.specs[party]):
            raise IncompatibleError(f"defense '{name}': {reason}")
    return defense
