"""``vflpriv audit``: every applicable attack x defense x strength x seed on one method, then a verdict.

The grid, per adversary and attacked phase: one undefended training per seed, on which every applicable
attack runs (its leakage over the prior decides the verdict), and one training per (defense, strength,
seed) with the defense acting in that phase, on which the attacks of that phase run (CAP, and the strength
at which the attack falls to the prior). Pairs that cannot run are listed with the planner's reason, not
skipped in silence. Defaults are quick on the bundled data: every registered attack with its
``audit_options``, every registered defense at its ``audit_strengths`` for the phase.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, NonNegativeFloat, model_validator

from vflpriv.common.errors import IncompatibleError
from vflpriv.config.options import Options
from vflpriv.config.registry import ATTACKS, DEFENSES, METHODS
from vflpriv.config.schema import (
    MAX_SEARCH_BUDGET,
    AttackConfig,
    DefenseConfig,
    Phase,
    RunConfig,
    TrainingConfig,
    refuse_untuned,
)
from vflpriv.config.sweep import RunsPerGpu, Seed, check_runs_per_gpu, refuse_repeats
from vflpriv.runner.prior import prior_pretraining
from vflpriv.workflows.audit_recipes import (
    FULL,
    QUICK,
    WEAKEST,
    default_attacks,
    default_strengths,
    quick_note,
    quick_seeds,
)

#: The most canaries an audit plants unless told, and the share of the labels it takes: each canary costs a real
#: label (splitnn on digits, 200 labels, tuned on nothing: 25 canaries cost 0.037 of test accuracy, 50 cost 0.10, 100
#: cost 0.26), and 25 ten-class canaries, every one guessed right, already certify epsilon 3.8.
AUTO_CANARIES, AUTO_SHARE = 50, 8


class AuditDefense(Options):
    """A defense of the audit; unset ``strengths`` take the defense's ``audit_strengths`` for the phase."""

    name: str
    strengths: list[NonNegativeFloat] | None = Field(None, min_length=1)
    kinds: list[str] | None = None
    party: int = Field(0, ge=0)
    options: dict[str, Any] = Field(default_factory=dict)


class AuditSettings(Options):
    attacks: list[str] | None = Field(None, description="attack names; default every registered attack")
    attack_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="options per attack name; default the attack's audit_options")
    defenses: list[AuditDefense] | None = Field(None, description="default every registered defense")
    phases: list[Phase] | None = Field(None, description="attacked phases; default finetune, and pretrain when the "
                                                         "method pretrains")
    prior: Literal["simsiam", "aux", "same-attack"] = "simsiam"
    prior_epochs: int = Field(300, ge=1)
    prior_ssl: Literal["auto", "simsiam", "own"] = Field(
        "auto", description="the adversary's own pretraining behind the prior (attack.prior_ssl); auto: the method's "
                            "own where a party can do it alone (local-*, ssvfl-*, vflhlp*), else SimSiam")
    margin: float = Field(0.02, ge=0, le=1, description="leakage tolerance of the verdicts and of 'falls to the prior'")
    adversaries: Literal["one", "all"] = Field("one", description="all: every passive party is the adversary in turn")
    tune: bool = Field(True, description="tune every attack that has a search space on the adversary's auxiliary "
                                         "labels (the worst-case adversary)")
    search_budget: int = Field(8, ge=1, le=MAX_SEARCH_BUDGET, description="candidates per tuned attack")
    search_spaces: dict[str, dict[str, list[Any]]] = Field(
        default_factory=dict, description="search space per attack name, replacing the attack's own for the options "
                                          "it names")
    active: Literal["weakest", "every"] = Field(
        WEAKEST, description="where an attack that acts (mc-active: a training of its own per run) runs: weakest: with "
                             "no defense and at each defense's weakest strength, at its other strengths only where it "
                             "beat the passive attacks of its kind there by more than the margin; every: everywhere")
    profile: Literal["full", "quick"] = Field(
        FULL, description="quick: one seed, the strongest attack of each kind, each defense at its middle strength, "
                          "for the development loop (audit.md says what it left out); full: the audit")
    canaries: int | None = Field(
        None, ge=0, description="random-label canaries in the trainings whose labels the attacked phase reads (an "
        f"empirical lower bound on each setting's label-DP epsilon); unset: one in {AUTO_SHARE} of partition.labeled, at "
        f"most {AUTO_CANARIES} (0 for a non-federated method); 0: none")

    @model_validator(mode="after")
    def _tuning_settings_need_tuning(self) -> AuditSettings:
        refuse_untuned(self, tune=self.tune, budget="search_budget", space="search_spaces", switch="audit.tune")
        return self


class AuditConfig(TrainingConfig):
    """The method under audit (a training config) and what to throw at it."""

    audit: AuditSettings = Field(default_factory=AuditSettings)
    seeds: list[Seed] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    jobs: int = Field(2, ge=1, le=1024)
    backend: Literal["loky", "threading", "dask", "ray"] = "loky"
    runs_per_gpu: RunsPerGpu = 1

    @model_validator(mode="before")
    @classmethod
    def _quick_seeds(cls, data: Any) -> Any:
        """The quick profile's one seed (``quick_seeds``), before the seeds are validated."""
        audit = data.get("audit") if isinstance(data, dict) else None
        if not isinstance(audit, dict) or audit.get("profile") != QUICK:
            return data
        given = "seeds" in data
        seeds = data["seeds"] if given else cls.model_fields["seeds"].get_default(call_default_factory=True)
        return {**data, "seeds": quick_seeds(seeds, given=given) if isinstance(seeds, list) else seeds}

    @model_validator(mode="after")
    def _no_repeats(self) -> AuditConfig:
        check_runs_per_gpu(self)
        if self.partition.canaries:
            raise ValueError("the audit plants its own canaries: give --canaries N (audit.canaries), not "
                             "partition.canaries")
        a = self.audit
        refuse_repeats(seeds=self.seeds, attacks=a.attacks, phases=a.phases)
        specs = [d.model_dump_json() for d in a.defenses or []]
        refuse_repeats(defenses=[d.name for d, spec in zip(a.defenses or [], specs) if specs.count(spec) > 1])
        for d in a.defenses or []:
            refuse_repeats(**{f"strengths of {d.name}": d.strengths})
        for what in ("attack_options", "search_spaces"):
            stray = sorted(set(getattr(a, what)) - set(a.attacks or ATTACKS.names()))
            if stray:
                raise ValueError(f"audit.{what} names {', '.join(stray)}, not an attack of this audit; its attacks: "
                                 f"{', '.join(a.attacks or ATTACKS.names())}")
        return self


@dataclass(frozen=True)
class Inapplicable:
    """A pair the audit could not run, and why (the planner's own message)."""

    attack: str
    defense: str
    phase: str
    reason: str


def _phases(cfg: AuditConfig) -> list[str]:
    if cfg.audit.phases:
        return list(cfg.audit.phases)
    return ["finetune", "pretrain"] if METHODS.get(cfg.method.name).pretrains else ["finetune"]


def prior_ssl(cfg: AuditConfig) -> str:
    """``audit.prior_ssl`` resolved, for the report (the attack configs carry it as given and the planner resolves it):
    ``auto`` is ``own`` where the method's pretraining can be done alone."""
    return prior_pretraining(cfg.method.name, cfg.audit.prior_ssl)


def _attack(cfg: AuditConfig, name: str, phase: str) -> AttackConfig:
    options = cfg.audit.attack_options.get(name, getattr(ATTACKS.get(name), "audit_options", {}))
    a = cfg.audit
    return AttackConfig(name=name, phase=phase, prior=a.prior, prior_epochs=a.prior_epochs, prior_ssl=a.prior_ssl,
                        options=options, tune=a.tune, search_budget=a.search_budget,
                        search_space=a.search_spaces.get(name, {}))


def resolved_options(cfg: AuditConfig) -> dict[str, dict]:
    """The options the audit ran with, defaults filled in: the method's, and each attack's (its ``audit_options``
    or the audit file's ``attack_options``), so a report records every value, not only those given."""
    method = METHODS.get(cfg.method.name).Options.model_validate(cfg.method.options).model_dump(mode="json")
    attacks = {}
    for name in cfg.audit.attacks or default_attacks(cfg.audit.profile):
        cls = ATTACKS.get(name)
        attacks[name] = cls.Options.model_validate(_attack(cfg, name, "finetune").options).model_dump(mode="json")
    return {"method": method, "attacks": attacks}


def _run(base: dict, attack: AttackConfig, defense: DefenseConfig | None, seed: int) -> RunConfig:
    data = {**base, "attack": attack.model_dump(), "seed": seed}
    data["defenses"] = [*base["defenses"], *([defense.model_dump()] if defense else [])]
    return RunConfig.model_validate(data)


def _try(runs: list[RunConfig]) -> str:
    """'' when the runs plan, else the planner's reason why they cannot (IncompatibleError: the method, task or
    phase lacks what the attack or defense needs). Bad input (an unknown option, a party that does not exist)
    is raised: the user fixes it; it is not a pair to set aside."""
    from vflpriv.runner.planning import plan

    try:
        plan(runs)
    except IncompatibleError as exc:
        return str(exc)
    return ""


def canaries(cfg: AuditConfig) -> int:
    """``audit.canaries`` resolved: as given, else one in :data:`AUTO_SHARE` of the labels, at most
    :data:`AUTO_CANARIES` (none for a non-federated method: no adversary guesses them)."""
    if cfg.audit.canaries is not None:
        return cfg.audit.canaries
    auto = min(AUTO_CANARIES, cfg.partition.labeled // AUTO_SHARE)
    return auto if METHODS.get(cfg.method.name).federated else 0


def profile_note(cfg: AuditConfig) -> str:
    """``audit.profile`` for the report: ``full``, or what the quick profile ran and left out."""
    if cfg.audit.profile == FULL:
        return FULL
    defenses = {}
    for d in cfg.audit.defenses if cfg.audit.defenses is not None else [AuditDefense(name=n) for n in DEFENSES.names()]:
        for phase in _phases(cfg):
            own = DEFENSES.get(d.name).audit_strengths.get(phase) or ()
            full = d.strengths or own
            defenses[f"{d.name} ({phase})" if len(_phases(cfg)) > 1 else d.name] = (
                full, d.strengths or default_strengths(QUICK, own) or ())
    default_seeds = AuditConfig.model_fields["seeds"].get_default(call_default_factory=True)
    return quick_note(default_seeds=default_seeds, seeds=cfg.seeds, attacks=cfg.audit.attacks or default_attacks(QUICK),
                      given_attacks=cfg.audit.attacks is not None, defenses=defenses)


def _planted(base: dict, count: int, phase: str, method: str) -> dict:
    """``base`` with ``count`` canaries where the attacked phase reads labels (finetuning; a pretraining only if it
    reads them): a label-free snapshot holds nothing of a canary's label."""
    reads = phase == "finetune" or METHODS.get(method).pretrain_reads_labels
    return {**base, "partition": {**base["partition"], "canaries": count if reads else 0}}


def audit_grid(cfg: AuditConfig) -> tuple[list[RunConfig], list[Inapplicable]]:
    """Every run of the audit, and every pair left out with its reason. A problem of the training itself (its
    dataset, device, method options) is raised once, not listed for every pair."""
    from vflpriv.runner.planning import plan_training

    plan_training(cfg.training())
    attacks = cfg.audit.attacks or default_attacks(cfg.audit.profile)
    defenses = cfg.audit.defenses if cfg.audit.defenses is not None else [AuditDefense(name=n) for n in DEFENSES.names()]
    parties = cfg.partition.parties
    adversaries = range(1, parties) if cfg.audit.adversaries == "all" else [cfg.partition.adversary]
    runs: list[RunConfig] = []
    skipped: list[Inapplicable] = []
    planted = canaries(cfg)
    for adversary in adversaries:
        unplanted = cfg.training().model_dump()
        unplanted["partition"]["adversary"] = adversary
        for phase in _phases(cfg):
            base = _planted(unplanted, planted, phase, cfg.method.name)
            applicable = []
            for name in attacks:
                attack = _attack(cfg, name, phase)
                reason = _try([_run(base, attack, None, cfg.seeds[0])])
                if reason:
                    skipped.append(Inapplicable(name, "none", phase, reason))
                else:
                    applicable.append(attack)
                    runs += [_run(base, attack, None, s) for s in cfg.seeds]
            if applicable and base["partition"]["canaries"]:  # what the canaries cost: the same training without
                runs += [_run(unplanted, applicable[0], None, s) for s in cfg.seeds]
            for d in defenses:
                strengths = d.strengths or default_strengths(cfg.audit.profile,
                                                             DEFENSES.get(d.name).audit_strengths.get(phase))
                unset = DefenseConfig(name=d.name, phase=phase, kinds=d.kinds, party=d.party, sweep=True,
                                      options=d.options)
                reason = _try([_run(base, applicable[0], unset, cfg.seeds[0])]) if applicable else ""
                if reason or not strengths:
                    skipped.append(Inapplicable("*", d.name, phase, reason or f"defense '{d.name}' declares no audit "
                                                f"strengths for the {phase} phase; give audit.defenses[].strengths"))
                    continue
                for attack in applicable:
                    defended = [DefenseConfig(name=d.name, strength=s, phase=phase, kinds=d.kinds, party=d.party,
                                              sweep=True, options=d.options) for s in strengths]
                    reason = _try([_run(base, attack, defended[0], cfg.seeds[0])])
                    if reason:
                        skipped.append(Inapplicable(attack.name, d.name, phase, reason))
                        continue
                    runs += [_run(base, attack, dc, s) for dc in defended for s in cfg.seeds]
    return runs, skipped
