"""Checks of an audit's settings that need the registries or the planner, each before any training and named as the
user gave it (``audit.attack_options.fi-decoder.epochs``, not the planner's ``attack.options.epochs``): the auditor a
defense's trainings run with, a named auditor the audit would drop silently, the attacks' options and search spaces."""

from __future__ import annotations

from vflpriv.common.errors import IncompatibleError
from vflpriv.config.options import CANDIDATE
from vflpriv.config.parse import check_space_values, parse_options
from vflpriv.config.registry import ATTACKS, AUDITORS, DEFENSES
from vflpriv.workflows.audit_config import AuditConfig, AuditDefense


def auditor_for(cfg: AuditConfig, defense: str) -> str | None:
    """``audit.auditor`` resolved for ``defense``'s trainings: auto, the first registered auditor that audits it; a
    name, that auditor where it audits it (an unknown one is refused); none, None."""
    choice = cfg.audit.auditor
    if choice == "none":
        return None
    names = AUDITORS.names() if choice == "auto" else [choice]
    cls = DEFENSES.get(defense)
    return next((n for n in names if AUDITORS.get(n).audits(cls)), None)


def check_canary_settings(cfg: AuditConfig, planted: int, defenses: list[AuditDefense]) -> None:
    """IncompatibleError where a setting about canaries would be dropped silently: canary labels from pairs, a named
    auditor or auditor options in an audit that plants none; a named auditor, or auditor options, beside no defense
    an auditor audits. The options are checked against each auditor the defenses get."""
    name = cfg.audit.auditor if cfg.audit.auditor not in ("auto", "none") else ""
    needs = [f"partition.canary_labels={cfg.partition.canary_labels}"] * (cfg.partition.canary_labels != "uniform")
    needs += [f"audit.auditor={name}"] * bool(name) + ["audit.auditor_options"] * bool(cfg.audit.auditor_options)
    if not planted and needs:
        raise IncompatibleError(f"{needs[0]} needs the random-label canaries, but this audit plants none "
                                "(audit.canaries resolved to 0); give --canaries N, or remove it")
    for auditor in dict.fromkeys(filter(None, (auditor_for(cfg, d.name) for d in defenses))):  # as the user named them
        parse_options(AUDITORS.get(auditor), cfg.audit.auditor_options, where="audit.auditor_options")
    if (name or cfg.audit.auditor_options) and not any(auditor_for(cfg, d.name) for d in defenses):
        ours = ", ".join(dict.fromkeys(d.name for d in defenses)) or "none"
        if not name:
            raise IncompatibleError(f"audit.auditor_options is set, but no auditor audits any of this audit's defenses "
                                    f"({ours}); remove it, or add a defense an auditor audits (vflpriv list auditors)")
        audited = ", ".join(n for n in DEFENSES.names() if AUDITORS.get(name).audits(DEFENSES.get(n)))
        raise IncompatibleError(f"audit.auditor={name} audits none of this audit's defenses ({ours}); it audits: "
                                f"{audited or 'none registered'}; add one to --defenses, or audit.auditor auto")


def check_attack_settings(cfg: AuditConfig) -> None:
    """``audit.attack_options`` and ``audit.search_spaces`` checked as given, before each run's planner sees them."""
    for name, options in cfg.audit.attack_options.items():
        parse_options(ATTACKS.get(name), options, where=f"audit.attack_options.{name}",
                      context=CANDIDATE if cfg.audit.tune else None)  # tuned: judged over the space, below
    for name, space in cfg.audit.search_spaces.items():
        check_space_values(ATTACKS.get(name), name, space, base=cfg.audit.attack_options.get(name, {}),
                           where=f"audit.search_spaces.{name}")
