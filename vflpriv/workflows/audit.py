"""``vflpriv audit``: every applicable attack x defense x strength x seed on one method, then a verdict.

The grid, per adversary and attacked phase: one undefended training per seed, on which every applicable
attack runs (its leakage over the prior decides the verdict), and one training per (defense, strength,
seed) with the defense acting in that phase, on which the attacks of that phase run (CAP, and the strength
at which the attack falls to the prior). Pairs that cannot run are listed with the planner's reason, not
skipped in silence. Defaults are quick on the bundled data: every registered attack with its
``audit_options``, every registered defense at its ``audit_strengths`` for the phase.

Both secrets: the label attacks run by each passive adversary (``partition.adversary``), the feature attacks by the
roles of ``audit.feature_adversaries`` on the same trainings: the active party and the server against party 1, and
the passive adversary against the active party, wherever the method sends that role anything about the victim's
samples (elsewhere listed with the planner's reason).

Defenses meet attacks by what each declares, never by a list: a label attack runs under every defense that claims
the labels (``Protection.secrets``); a feature attack under every defense that acts on what it reads
(``Protection.acts_on``: the victim's messages of that kind on the channel, the victim's own points, or each received
embedding inside the active party's model or loss), whatever that defense claims, so ISO or gaussian-message on the
embeddings, MID at the receiver and dCor on the labels are measured against the feature attacks too; CAE, which
touches no embedding, is not. ``audit.feature_defended`` names the feature attacks run under defenses (default the
decoder, the cheapest and on the bundled data the strongest; every feature attack gives its verdict without a
defense). The default defenses are every registered defense, and, for one that supports the embedding kind without
defaulting to it and declares ``embedding_audit_strengths``, that defense on the passive parties' embeddings too.

The settings (``AuditConfig``, ``AuditSettings``, ``AuditDefense``) are in :mod:`vflpriv.workflows.audit_config`.
"""

from __future__ import annotations

from dataclasses import dataclass

from vflpriv.common.errors import ConfigError, IncompatibleError, UnfitOptionsError
from vflpriv.config.options import CANDIDATE, read_alone
from vflpriv.config.parse import as_audited, parse_options
from vflpriv.config.registry import ATTACKS, DEFENSES, METHODS
from vflpriv.config.schema import AttackConfig, DefenseConfig, RunConfig
from vflpriv.defenses.declarations import declared_secrets
from vflpriv.methods.base import pretraining_reads_labels
from vflpriv.runner.prior import prior_pretraining
from vflpriv.workflows.audit_checks import auditor_for, check_attack_settings, check_canary_settings
from vflpriv.workflows.audit_config import AUTO_CANARIES, AUTO_SHARE, MAX_SHARE, AuditConfig, AuditDefense
from vflpriv.workflows.audit_recipes import FULL, QUICK, default_attacks, default_strengths, quick_note

@dataclass(frozen=True)
class Inapplicable:
    """A pair the audit could not run, and why (the planner's own message); ``left_out``: an attack the default
    battery leaves out where it is known to fail (``Attack.left_out_of_audit``)."""

    attack: str
    defense: str
    phase: str
    reason: str
    left_out: bool = False


def _phases(cfg: AuditConfig) -> list[str]:
    if cfg.audit.phases:
        return list(cfg.audit.phases)
    return ["finetune", "pretrain"] if METHODS.get(cfg.method.name).pretrains else ["finetune"]


def prior_ssl(cfg: AuditConfig) -> str:
    """``audit.prior_ssl`` resolved, for the report (the attack configs carry it as given and the planner resolves it):
    ``auto`` is ``own`` where the method's pretraining can be done alone."""
    return prior_pretraining(cfg.method.name, cfg.audit.prior_ssl)


def _attack(cfg: AuditConfig, name: str, phase: str, *, adversary: int | str | None = None,
            victim: int | None = None) -> AttackConfig:
    options = cfg.audit.attack_options.get(name, getattr(ATTACKS.get(name), "audit_options", {}))
    a = cfg.audit
    return AttackConfig(name=name, phase=phase, prior=a.prior, prior_epochs=a.prior_epochs, prior_ssl=a.prior_ssl,
                        options=options, tune=a.tune, search_budget=a.search_budget,
                        search_space=a.search_spaces.get(name, {}), adversary=adversary, victim=victim)


def _attacks(cfg: AuditConfig, name: str, phase: str, adversary: int, first: bool) -> list[tuple[str, AttackConfig]]:
    """The audit's runs of attack ``name`` against label adversary ``adversary``, each named for the lists: a label
    attack once; a feature attack once per role of ``audit.feature_adversaries`` (the active party's and the
    server's with the first label adversary only: they do not depend on it)."""
    if getattr(ATTACKS.get(name), "secret", "labels") == "labels":
        return [(name, _attack(cfg, name, phase))]
    roles = {"active": (0, None), "server": ("server", None), "passive": (adversary, 0)}
    return [(f"{name} by {'party ' + str(who) if isinstance(who, int) else who}", _attack(cfg, name, phase,
                                                                                        adversary=who, victim=victim))
            for role, (who, victim) in roles.items() if role in cfg.audit.feature_adversaries
            and (first or role == "passive")]


def _paired(p) -> bool:
    """Whether the planned run ``p`` (one attack, the audited defense last) belongs to the audit: a label attack under
    a defense that claims the labels; a feature attack under one that acts on what the attack reads (nothing, on a
    method that is not federated)."""
    a, d = p.attacks[0], p.defenses[-1]
    if a.attack.secret == "labels":
        return "labels" in d.secrets
    return bool(a.adversary.reads) and d.acts_on(a.adversary.reads[0][0], a.config.attack.phase, a.adversary.victim)


def default_defenses() -> list[AuditDefense]:
    """Every registered defense as it defaults, and on the passive parties' embeddings where it declares strengths
    for that (``embedding_audit_strengths``)."""
    out = []
    for name in DEFENSES.names():
        cls = DEFENSES.get(name)
        out.append(AuditDefense(name=name))
        if cls.embedding_audit_strengths and "embedding" not in cls.default_kinds:
            out.append(AuditDefense(name=name, kinds=["embedding"]))
    return out


def resolved_options(cfg: AuditConfig) -> dict[str, dict]:
    """The options the audit ran with, defaults filled in: the method's, and each attack's (its ``audit_options``
    or the audit file's ``attack_options``), so a report records every value, not only those given."""
    method = METHODS.get(cfg.method.name).Options.model_validate(cfg.method.options).model_dump(mode="json")
    attacks = {}
    for name in cfg.audit.attacks or default_attacks(cfg.audit.profile):
        cls = ATTACKS.get(name)
        options = cls.Options.model_validate(_attack(cfg, name, "finetune").options, context=CANDIDATE)  # checked
        attacks[name] = options.model_dump(mode="json")
    return {"method": method, "attacks": attacks}


def _run(base: dict, attack: AttackConfig, defense: DefenseConfig | None, seed: int) -> RunConfig:
    data = {**base, "attack": attack.model_dump(), "seed": seed}
    data["defenses"] = [*base["defenses"], *([defense.model_dump()] if defense else [])]
    return RunConfig.model_validate(data)


def _try(runs: list[RunConfig], *, default_battery: bool = False, given: bool = False) -> str:
    """'' when the runs plan, else the planner's reason why they cannot (IncompatibleError: the method, task or
    phase lacks what the attack or defense needs). Bad input (an unknown option, a party that does not exist, an
    option the user ``given`` for the attack that this data leaves unread: UnfitOptionsError, which the grid refuses
    where it fits none of the attack's adversaries and victims) is raised. ``default_battery``: also the reason an
    attack of the default battery is left out there (:data:`LEFT_OUT` and ``Attack.left_out_of_audit``)."""
    planned, reason = _planned(runs, given=given)
    if reason or not default_battery:
        return reason
    a = planned.attacks[0]
    declared = planned.method.declared(a.config, num_classes=planned.scenario.dataset.num_classes)
    reason = getattr(a.attack, "left_out_of_audit", lambda run: "")(declared)
    return f"{LEFT_OUT}: {reason}" if reason else ""


def _planned(runs: list[RunConfig], *, given: bool = False):
    """(the plan, '') when the runs plan, else (None, the planner's reason) (see :func:`_try`)."""
    from vflpriv.runner.planning import plan

    try:
        return plan(runs), ""
    except IncompatibleError as exc:
        if given and isinstance(exc, UnfitOptionsError):
            raise
        return None, str(exc)
    except ConfigError as exc:  # named as the audit's settings, not the run's (review var F5)
        raise ConfigError(as_audited(str(exc), runs[0].attack.name)) from exc.__cause__


#: How an attack the default battery leaves out is listed.
LEFT_OUT = "left out of the default audit"


def canaries(cfg: AuditConfig) -> int:
    """``audit.canaries`` resolved: as given, else one in :data:`AUTO_SHARE` of the labels, at most
    :data:`AUTO_CANARIES`, raised to :func:`canaries_for_claims` (at most one in :data:`MAX_SHARE` of the labels; none
    for a non-federated method, where no adversary guesses them, where no attacked phase reads labels, where none
    could be planted, nor where no planned attack guesses labels: a feature-only audit's canaries would cost labels
    for no bound). Given where none could be planted or guessed, it is refused."""
    reads = any(_reads_labels(phase, cfg.method.name) for phase in _phases(cfg))
    names = cfg.audit.attacks or default_attacks(cfg.audit.profile)
    guessed = any(_guesses_labels(n) for n in names)
    if cfg.audit.canaries is not None:
        if cfg.audit.canaries and not reads:
            raise IncompatibleError(
                f"audit.canaries={cfg.audit.canaries}: the attacked phase(s) {', '.join(_phases(cfg))} of method "
                f"'{cfg.method.name}' read no labels, so no canary can be planted where an attack would guess it; "
                "attack the finetune phase too (--phases "
                + ("finetune,pretrain" if METHODS.get(cfg.method.name).pretrains else "finetune")
                + "), or give --canaries 0")
        if cfg.audit.canaries and not guessed:
            raise IncompatibleError(
                f"audit.canaries={cfg.audit.canaries}: no attack of this audit guesses a canary (its attacks: "
                f"{', '.join(names)} reconstruct features), so they would cost labels for no bound; add a label "
                "attack to --attacks (vflpriv list attacks), or give --canaries 0")
        return cfg.audit.canaries
    if not METHODS.get(cfg.method.name).federated or not guessed:
        return 0
    auto = min(AUTO_CANARIES, cfg.partition.labeled // AUTO_SHARE)
    if not reads:
        return 0
    return max(auto, canaries_for_claims(cfg))


def canaries_for_claims(cfg: AuditConfig) -> int:
    """Per training, the fewest canaries whose cap (every guess right, pooled over the seeds, each of the audit's
    planned label attacks at 5%/A with the menu its counts carry: the share the claim test gives them) exceeds every
    epsilon the audit's DP strengths claim that one in :data:`MAX_SHARE` of the labels can test; 0 without such a
    claim (a feature-only audit plants none: :func:`canaries`). A claim that needs more stays untestable, and the
    report says how many canaries it would need: planting the largest share for it would cost labels for no test
    (more canaries raise the cap, so the most the worst case could certify, but a higher certified bound tests no
    claim, and the :data:`AUTO_SHARE` canaries already give the empirical bound)."""
    from vflpriv.runner.planning import plan_training

    claims = _audit_claims(cfg)
    if not claims:
        return 0
    classes = 2 if cfg.partition.canary_labels == "pair" else plan_training(cfg.training()).scenario.dataset.num_classes
    attacks = sum(_guesses_labels(n) for n in cfg.audit.attacks or default_attacks(cfg.audit.profile))
    seeds, largest = len(cfg.seeds), cfg.partition.labeled // MAX_SHARE
    pooled = [_needed(eps, classes=classes, attacks=attacks, delta=delta, seeds=seeds) for eps, delta in claims]
    return max((need for n in pooled if n is not None and (need := -(-n // seeds)) <= largest), default=0)


def _needed(claim: float, *, classes: int, attacks: int, delta: float, seeds: int) -> int | None:
    """:func:`canaries_needed` pooled over the seeds, or None where no count up to its largest can test the claim."""
    from vflpriv.common.canary_bound import Untestable, canaries_needed

    try:
        return canaries_needed(claim, classes=classes, attacks=max(attacks, 1), delta=delta, seeds=seeds)
    except Untestable:
        return None


def _adversaries(cfg: AuditConfig) -> list[int]:
    """The passive parties the label attacks run as: every one with ``--all-adversaries``, else the partition's."""
    return list(range(1, cfg.partition.parties)) if cfg.audit.adversaries == "all" else [cfg.partition.adversary]


def _guesses_labels(attack: str) -> bool:
    """Whether attack ``attack`` guesses labels, so canaries too (a feature attack guesses none)."""
    return getattr(ATTACKS.get(attack), "secret", "labels") == "labels"


def _defenses(cfg: AuditConfig) -> list[AuditDefense]:
    """The audit's defenses: as given, else every registered one (:func:`default_defenses`)."""
    return cfg.audit.defenses if cfg.audit.defenses is not None else default_defenses()


def _audit_claims(cfg: AuditConfig) -> list[tuple[float, float]]:
    """Every (epsilon, delta) a DP defense of the audit will claim at its strengths, where planning knows it."""
    defenses = _defenses(cfg)
    claims = []
    for d in defenses:
        cls = DEFENSES.get(d.name)
        for phase in _phases(cfg):
            strengths = d.strengths_for(phase, finetune=cfg.finetune) or ()
            claims += [c for s in strengths if (c := cls.claimed_epsilon(s, finetune=cfg.finetune,
                                                                         options=d.options)) is not None]
    return claims

def _reads_labels(phase: str, method: str) -> bool:
    """Whether the trainings attacked in ``phase`` read the labels a canary would change: finetuning does, a
    pretraining only if it may read them (as its pretraining key has it: undeclared code of its own counts)."""
    return phase == "finetune" or pretraining_reads_labels(METHODS.get(method))


def _control(attack: AttackConfig) -> AttackConfig:
    """The attack block of a canary-free control training: untuned and without a prior, so that its records measure
    the utility the canaries cost and never enter a leakage test (a record without a prior has no leakage: each seed
    counts once in a verdict)."""
    options = read_alone(ATTACKS.get(attack.name).Options, attack.options)  # a tuned audit's may hold more
    return AttackConfig(name=attack.name, phase=attack.phase, prior="none", options=options)


def profile_note(cfg: AuditConfig) -> str:
    """``audit.profile`` for the report: ``full``, or what the quick profile ran and left out."""
    if cfg.audit.profile == FULL:
        return FULL
    defenses = {}
    for d in _defenses(cfg):
        for phase in _phases(cfg):
            own = d.strengths_for(phase, finetune=cfg.finetune) or ()
            name = d.name + (" on embeddings" if d.kinds == ["embedding"] else "")
            defenses[f"{name} ({phase})" if len(_phases(cfg)) > 1 else name] = (
                own, d.strengths or default_strengths(QUICK, own) or ())
    default_seeds = AuditConfig.model_fields["seeds"].get_default(call_default_factory=True)
    return quick_note(default_seeds=default_seeds, seeds=cfg.seeds, attacks=cfg.audit.attacks or default_attacks(QUICK),
                      given_attacks=cfg.audit.attacks is not None, defenses=defenses, tuned=cfg.audit.tune)


def _planted(base: dict, count: int, phase: str, method: str, labels: str) -> dict:
    """``base`` with ``count`` canaries, their labels drawn as ``labels`` says (``partition.canary_labels``), where
    the attacked phase reads labels (finetuning; a pretraining only if it reads them): a label-free snapshot holds
    nothing of a canary's label."""
    count = count if _reads_labels(phase, method) else 0
    return {**base, "partition": {**base["partition"], "canaries": count,
                                  "canary_labels": labels if count else "uniform"}}


def audit_grid(cfg: AuditConfig) -> tuple[list[RunConfig], list[Inapplicable]]:
    """Every run of the audit, and every pair left out with its reason. A problem of the training itself (its
    dataset, device, method options) is raised once, not listed for every pair."""
    from vflpriv.runner.planning import plan_training, refuse_unread_aux_features

    attacks = cfg.audit.attacks or default_attacks(cfg.audit.profile)
    refuse_unread_aux_features(cfg.partition.aux_features, attacks)
    plan_training(cfg.training())
    defenses = _defenses(cfg)
    for i, d in enumerate(defenses):  # before their strengths and claims are read (the canaries' sizing reads them)
        cls = DEFENSES.get(d.name)
        parse_options(cls, d.options, where=f"audit.defenses[{i}].options")
        if option := cls.own_strength_option(d.options):
            raise ConfigError(f"audit.defenses[{i}].options.{option} sets {d.name}'s strength to one setting, but the "
                              f"audit sweeps its strengths; remove it and give audit.defenses[{i}].strengths (on its "
                              f"axis, {cls.axis.name}), or leave them out for its audit strengths")
    check_attack_settings(cfg)
    adversaries = _adversaries(cfg)
    runs: list[RunConfig] = []
    skipped: list[Inapplicable] = []
    planted = canaries(cfg)
    check_canary_settings(cfg, planted, defenses)
    unfit: dict[str, list[str]] = {}  # an attack's given options that do not fit a cell: each cell's reason
    for adversary in adversaries:
        unplanted = cfg.training().model_dump()
        unplanted["partition"]["adversary"] = adversary
        controlled = False  # one canary-free control training per seed, whatever the attacked phases
        for phase in _phases(cfg):
            base = _planted(unplanted, planted, phase, cfg.method.name, cfg.partition.canary_labels)
            applicable = []
            for label, attack in [a for name in attacks for a in _attacks(cfg, name, phase, adversary,
                                                                            adversary == adversaries[0])]:
                given = attack.name in cfg.audit.attack_options or attack.name in cfg.audit.search_spaces
                try:
                    reason = _try([_run(base, attack, None, cfg.seeds[0])], given=given,
                                  default_battery=cfg.audit.attacks is None)
                except UnfitOptionsError as exc:  # refused below where the option fits none of the attack's cells
                    unfit.setdefault(attack.name, []).append(as_audited(str(exc), attack.name))
                    reason = (f"{unfit[attack.name][-1]} (set aside: the option fits another cell of the audit: "
                              "adversary, victim or phase)")
                if reason:
                    skipped.append(Inapplicable(label, "none", phase, reason, reason.startswith(LEFT_OUT)))
                else:
                    applicable.append(attack)
                    runs += [_run(base, attack, None, s) for s in cfg.seeds]
            passive = [a for a in applicable if not ATTACKS.get(a.name).acts  # a label attack that leaves the
                       and getattr(ATTACKS.get(a.name), "secret", "labels") == "labels"]  # training alone
            if passive and base["partition"]["canaries"] and not controlled:  # what the canaries cost: the same
                runs += [_run(unplanted, _control(passive[0]), None, s) for s in cfg.seeds]  # training without them
                controlled = True
            for d in defenses:
                strengths = d.strengths or default_strengths(cfg.audit.profile,
                                                             d.strengths_for(phase, finetune=cfg.finetune))
                unset = DefenseConfig(name=d.name, phase=phase, kinds=d.kinds, party=d.party, sweep=True,
                                      options=d.options)
                reason = _defense_refused(base, applicable, unset, cfg.seeds[0])
                if reason or not strengths:
                    skipped.append(Inapplicable("*", d.name, phase, reason or f"defense '{d.name}' declares no audit "
                                                f"strengths for the {phase} phase; give audit.defenses[].strengths"))
                    continue
                paired = False
                auditor = auditor_for(cfg, d.name) if base["partition"]["canaries"] else None
                audited = {**base, "finetune": {**base["finetune"], "auditor": auditor,
                                                "auditor_options": cfg.audit.auditor_options}} if auditor else base
                for attack in applicable:
                    if ATTACKS.get(attack.name).secret != "labels" and attack.name not in cfg.audit.feature_defended:
                        continue
                    defended = [DefenseConfig(name=d.name, strength=s, phase=phase, kinds=d.kinds, party=d.party,
                                              sweep=True, options=d.options) for s in strengths]
                    refused = _try([_run(audited, attack, defended[0], cfg.seeds[0])]) if audited is not base else ""
                    if refused and not _try([_run(base, attack, defended[0], cfg.seeds[0])]):
                        skipped.append(Inapplicable(f"auditor {auditor}", d.name, phase, refused))  # the auditor's
                        audited = base  # refusal: this defense's trainings go without it, said once
                    p, reason = _planned([_run(base if refused else audited, attack, defended[0], cfg.seeds[0])])
                    if reason:
                        skipped.append(Inapplicable(attack.name, d.name, phase, reason))
                        continue
                    if _paired(p):
                        paired = True
                        runs += [_run(audited, attack, dc, s) for dc in defended for s in cfg.seeds]
                named = cfg.audit.defenses is not None  # the default battery's defenses of the other secret are not
                if named and not paired and not any(s.defense == d.name and s.phase == phase for s in skipped):
                    # a defense the user named that none of the attacks is judged under: said, not silently dropped
                    skipped.append(Inapplicable("*", d.name, phase, _unpaired(d.name, applicable, phase)))
    fits = {r.attack.name for r in runs}
    for name, reasons in unfit.items():
        if name not in fits:  # the user's option fits none of the attack's adversaries and victims
            raise ConfigError("; ".join(dict.fromkeys(reasons)))
    return runs, skipped


def _defense_refused(base: dict, attacks: list[AttackConfig], unset: DefenseConfig, seed: int) -> str:
    """Why ``unset`` plans with none of ``attacks`` (the first's reason: a problem of the defense itself, said once),
    or '' where one plans; an attack refused only under this defense is set aside with its own reason later."""
    first = ""
    for attack in attacks:
        reason = _try([_run(base, attack, unset, seed)])
        if not reason:
            return ""
        first = first or reason
    return first


def _unpaired(defense: str, attacks: list[AttackConfig], phase: str) -> str:
    """Why ``defense`` runs under none of ``attacks`` (``_paired``: the secret it claims, what it acts on)."""
    secrets = ", ".join(sorted(declared_secrets(DEFENSES.get(defense))))
    names = ", ".join(dict.fromkeys(a.name for a in attacks)) or "none applies"
    return (f"defense '{defense}' is judged under none of this audit's attacks in {phase} ({names}): a label attack "
            f"runs under a defense that claims the labels (it claims: {secrets or 'nothing'}), a feature attack of "
            "audit.feature_defended under one that acts on the messages it reads; add such an attack, or leave the "
            "defense out")
