"""The audit's settings: ``audit:`` of an audit file (:class:`AuditSettings`), its defenses (:class:`AuditDefense`)
and the whole configuration, a training plus what to throw at it (:class:`AuditConfig`), validated when parsed.
``vflpriv.workflows.audit`` builds the grid from them."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, NonNegativeFloat, model_validator

from vflpriv.common.errors import ConfigError, VflprivError
from vflpriv.config.options import Options
from vflpriv.config.plugin_checks import shown
from vflpriv.config.registry import ATTACKS, DEFENSES
from vflpriv.config.schema import MAX_SEARCH_BUDGET, Phase, TrainingConfig, refuse_empty_kinds, refuse_untuned
from vflpriv.config.sweep import RunsPerGpu, Seeds, check_runs_per_gpu, refuse_repeats
from vflpriv.workflows.audit_recipes import FULL, QUICK, WEAKEST, default_attacks, quick_seeds

#: The most canaries an audit plants unless told, and the share of the labels it takes: each canary costs a real
#: label (splitnn on digits, 200 labels, tuned on nothing: 25 canaries cost 0.037 of test accuracy, 50 cost 0.10, 100
#: cost 0.26), and 25 ten-class canaries a seed, pooled over 3 seeds and 10 attacks, cap the worst case at 4.57.
AUTO_CANARIES, AUTO_SHARE = 50, 8
#: Where a claim of the audit's DP strengths needs more canaries to be testable, the audit plants them, up to this
#: share of the labels (beyond it the training is more canaries than task).
MAX_SHARE = 4


class AuditDefense(Options):
    """A defense of the audit; unset ``strengths`` take the defense's ``audit_strengths`` for the phase."""

    name: str
    strengths: list[NonNegativeFloat] | None = Field(None, min_length=1)
    kinds: list[str] | None = None
    party: int | None = Field(None, ge=0, description="the protecting party; unset: the planner's default (the active "
                                                       "party; every passive party for what only they send or hold)")
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _kinds_not_empty(self) -> AuditDefense:
        refuse_empty_kinds(self.name, self.kinds)
        return self

    def strengths_for(self, phase: str, *, finetune) -> tuple[float, ...] | None:
        """Its strengths in ``phase`` of a run finetuned by ``finetune``: as given, else the defense's own (on
        embeddings, its ``embedding_audit_strengths``; else ``audit_strengths_for``)."""
        if self.strengths:
            return tuple(self.strengths)
        cls = DEFENSES.get(self.name)
        if self.kinds == ["embedding"] and phase in cls.embedding_audit_strengths:
            return cls.embedding_audit_strengths[phase]
        found = cls.audit_strengths_for(phase, finetune=finetune, options=self.options)
        if found is None or type(found) is tuple and all(type(v) is not bool and isinstance(v, (int, float))
                                                         and math.isfinite(v) and v >= 0 for v in found):
            return found  # a plugin's own (review misc2 M2: NaN was a pydantic traceback where the runs are planned)
        raise ConfigError(f"defense '{self.name}': its audit_strengths_for({phase!r}) returned {shown(found)}; give a "
                          "tuple of finite strengths >= 0 (weak to strong), or None for no audit strengths there")


class AuditSettings(Options):
    attacks: list[str] | None = Field(None, description="attack names; default every registered attack")
    attack_options: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="options per attack name; default the attack's audit_options")
    defenses: list[AuditDefense] | None = Field(None, description="default every registered defense")
    phases: list[Phase] | None = Field(None, description="attacked phases; default finetune, and pretrain when the "
                                                         "method pretrains")
    prior: Literal["simsiam", "aux", "same-attack"] = Field(
        "simsiam", description="the label attacks' prior (attack.prior; unread by the feature attacks, which fit "
                               "theirs on their known samples, as prior_epochs and prior_ssl)")
    prior_epochs: int = Field(300, ge=1, description="training epochs of the label prior's head")
    prior_ssl: Literal["auto", "simsiam", "own"] = Field(
        "auto", description="the adversary's own pretraining behind the label prior (attack.prior_ssl); auto: the "
                            "method's own where a party can do it alone (local-*, ssvfl-*, vflhlp*), else SimSiam")
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
    feature_adversaries: list[Literal["active", "server", "passive"]] = Field(
        default_factory=lambda: ["active", "server", "passive"],
        description="who runs the feature attacks: the active party and the server (against party 1), the passive "
                    "adversary (against the active party's features)")
    feature_defended: list[str] = Field(
        default_factory=lambda: ["fi-decoder"], description="feature attacks also run under each defense that "
        "protects their victim's messages")
    feature_margin: float = Field(0.05, ge=0, le=1, description="feature leakage tolerance of the verdicts, as a "
                                                                "share of the prior's MSE")
    canaries: int | None = Field(
        None, ge=0, description="random-label canaries in the trainings whose labels the attacked phase reads (an "
        f"empirical lower bound on each setting's label-DP epsilon); unset: one in {AUTO_SHARE} of partition.labeled, at "
        f"most {AUTO_CANARIES}, raised (up to one in {MAX_SHARE}) to the fewest whose cap exceeds every epsilon the "
        "audit's DP strengths claim (0 for a non-federated method); 0: none")

    auditor: str = Field(
        "auto", description="an auditor of each defended training's DP claim, beside the attacks (vflpriv list auditors): "
        "auto attaches the one that audits the defense, where there are canaries; none; or a name")
    auditor_options: dict[str, Any] = Field(
        default_factory=dict, description="the attached auditor's options (finetune.auditor_options of its trainings; "
        "vflpriv describe <auditor>), e.g. canary_inputs: crafted for gradient-lrt")

    @model_validator(mode="before")
    @classmethod
    def _none_is_the_baseline(cls, data: Any) -> Any:
        """``{name: none}`` in ``defenses`` is the undefended baseline every audit runs (``--defenses none``): left out;
        an empty list is refused, as ``--defenses ''`` is (it planned as ``none`` silently)."""
        defenses = data.get("defenses") if isinstance(data, dict) else None
        if defenses == []:
            raise ValueError(f"audit.defenses is empty; name defenses ({', '.join(['none', *DEFENSES.names()])}), "
                             "or leave it out for every registered one")
        if not isinstance(defenses, list):
            return data
        nones = [d for d in defenses if isinstance(d, dict) and d.get("name") == "none"]
        if any(d != {"name": "none"} for d in nones):
            raise ValueError("audit.defenses: none (the undefended baseline) takes no settings; give it as "
                             "{name: none}")
        refuse_repeats(**{"audit.defenses": ["none"] * len(nones)})
        return {**data, "defenses": [d for d in defenses if d not in nones]}

    @model_validator(mode="after")
    def _tuning_settings_need_tuning(self) -> AuditSettings:
        refuse_untuned(self, tune=self.tune, budget="search_budget", space="search_spaces", switch="audit.tune")
        if self.attacks == []:  # not "every registered attack" (more than the default battery): as --attacks ""
            raise ValueError(f"audit.attacks is empty; name attacks ({', '.join(ATTACKS.names())}), or leave it out "
                             "for the default battery")
        if self.phases == []:
            raise ValueError("audit.phases is empty; name finetune, pretrain or both, or leave it out for finetune "
                             "(and pretrain where the method pretrains)")
        return self


class AuditConfig(TrainingConfig):
    """The method under audit (a training config) and what to throw at it."""

    audit: AuditSettings = Field(default_factory=AuditSettings)
    seeds: Seeds = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    jobs: int = Field(2, ge=1, le=1024)
    backend: Literal["loky", "threading", "dask", "ray"] = "loky"
    runs_per_gpu: RunsPerGpu = 1

    @model_validator(mode="before")
    @classmethod
    def _quick_profile(cls, data: Any) -> Any:
        """The quick profile's one seed (``quick_seeds``), before the seeds are validated, and its untuned attacks
        unless ``audit.tune`` is given (tuning is half of a quick audit's time: MixMatch's search and refit)."""
        audit = data.get("audit") if isinstance(data, dict) else None
        if not isinstance(audit, dict) or audit.get("profile") != QUICK:
            return data
        given = "seeds" in data
        seeds = data["seeds"] if given else cls.model_fields["seeds"].get_default(call_default_factory=True)
        return {**data, "audit": {"tune": False, **audit},
                "seeds": quick_seeds(seeds, given=given) if isinstance(seeds, list) else seeds}

    def training(self) -> TrainingConfig:
        """The audited training without canaries: ``partition.canary_labels`` is applied where the audit plants them
        (``vflpriv.workflows.audit``), and a training without canaries draws none."""
        training = super().training()
        return training.model_copy(update={"partition": training.partition.model_copy(
            update={"canary_labels": "uniform"})})

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
        attacks = a.attacks or default_attacks(a.profile)  # --quick runs the strongest of each kind only
        for what in ("attack_options", "search_spaces"):
            stray = sorted(set(getattr(a, what)) - set(attacks))
            if stray:
                raise ValueError(f"audit.{what} names {', '.join(stray)}, not an attack of this audit; its attacks: "
                                 f"{', '.join(attacks)}")
        _check_feature_settings(a)
        return self


def _check_feature_settings(a: AuditSettings) -> None:
    """The feature-attack settings name what the audit runs: its feature attacks, roles given once, an auditor's
    options only beside an auditor (ValueError naming the valid choices)."""
    features = [n for n in a.attacks or ATTACKS.names() if _secret(n) == "features"]
    refuse_repeats(**{"audit.feature_adversaries": a.feature_adversaries, "audit.feature_defended": a.feature_defended})
    if features and not a.feature_adversaries:
        raise ValueError(f"audit.feature_adversaries is empty, so the feature attacks ({', '.join(features)}) would run "
                         "nowhere; name who runs them (active, server, passive), or leave them out of --attacks")
    # its default names fi-decoder whatever --attacks says (and a config dumped and read again holds the default)
    given = a.feature_defended != type(a).model_fields["feature_defended"].get_default(call_default_factory=True)
    stray = [n for n in a.feature_defended if n not in features and (given or _secret(n) != "features")]
    if stray:
        raise ValueError(f"audit.feature_defended names {', '.join(stray)}, not a feature attack of this audit; its "
                         f"feature attacks: {', '.join(features) or 'none'}")
    if a.auditor == "none" and a.auditor_options:
        raise ValueError("audit.auditor_options is set but audit.auditor is none: name the auditor (or auto), or "
                         "remove its options")


def _secret(name: str) -> str:
    try:
        return getattr(ATTACKS.get(name), "secret", "labels")
    except VflprivError:
        return "labels"  # an unknown name: refused with the valid ones where the attacks are resolved
