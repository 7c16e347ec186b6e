"""The runner's side of an auditor (``vflpriv.auditors``): resolve and check ``finetune.auditor`` before training, bind
the auditor to the federation with every label but the canaries', and score its guesses of the canaries into the
records' ``auditor_*`` fields, apart from every attack's numbers."""

from __future__ import annotations

import json
from typing import Any

import torch


from vflpriv.common.empirical_epsilon import KEEP, menu_lower
from vflpriv.common.errors import IncompatibleError, class_named
from vflpriv.common.fdp_one_run import fdp_bounds
from vflpriv.config.registry import AUDITORS, DEFENSES
from vflpriv.config.schema import TrainingConfig
from vflpriv.data.scenario import Scenario
from vflpriv.engine import AUDIT_UPDATE, SOFT_LABELS, Federation
from vflpriv.methods.base import Method
from vflpriv.runner.scoring import menu_counts
from vflpriv.store.records import RunRecord


def plan_auditor(config: TrainingConfig, method: Method, defenses: list) -> tuple[Any, Any]:
    """``finetune.auditor`` resolved: (the auditor's class, the defense it audits), or (None, None) when none is named. It
    guesses the canaries from the private updates the shared loop hands it, so it needs both, and a defense it audits
    that releases noisy updates (not its identity) beside no soft-label defense (it knows the labels by class)."""
    name = config.finetune.auditor
    if name is None:
        if config.finetune.auditor_options:
            raise IncompatibleError("finetune.auditor_options is set but finetune.auditor is not: name the auditor "
                                    "(vflpriv list auditors), or remove its options")
        return None, None
    cls = AUDITORS.get(name)
    if not config.partition.canaries:
        raise IncompatibleError(f"finetune.auditor={name} guesses the random-label canaries; set partition.canaries "
                                "(vflpriv audit: --canaries)")
    if AUDIT_UPDATE not in method.supported():
        raise IncompatibleError(f"finetune.auditor={name}: method '{config.method.name}' trains with a loop of its own "
                                f"that does not hand an auditor its private updates ({AUDIT_UPDATE})")
    audited = [(c.name, d) for c, d in zip(config.defenses, defenses) if cls.audits(type(d))]
    if not audited:
        valid = [n for n in DEFENSES.names() if cls.audits(DEFENSES.get(n))]
        raise IncompatibleError(f"finetune.auditor={name} audits {', '.join(valid) or 'no registered defense'}; this "
                                "training has none of them: add one, or remove finetune.auditor")
    (audited_name, defense), soft = audited[0], [c.name for c, d in zip(config.defenses, defenses)
                                                 if SOFT_LABELS in d.hook_points]
    if defense.is_identity:
        raise IncompatibleError(f"finetune.auditor={name}: defense '{audited_name}' at its identity strength releases "
                                "exact gradients, nothing to audit; give it a strength")
    if soft:
        raise IncompatibleError(f"finetune.auditor={name} knows the labels the active party trains with by class; "
                                f"{', '.join(soft)} trains it on soft labels: remove one of them")
    return cls, defense


def check_auditor(auditor: Any, config: TrainingConfig, method: Method, *, classes: int) -> None:
    """The auditor as its options make it: every audit point it needs is one ``method``'s loop calls, and it can audit
    a training of ``config`` as the method really trains it (one ``error:`` line otherwise)."""
    name = config.finetune.auditor
    missing = sorted(auditor.hook_points() - method.supported())
    if missing:
        raise IncompatibleError(f"finetune.auditor={name} with these options needs {', '.join(missing)}, which method "
                                f"'{config.method.name}' does not call")
    reason = auditor.refuses(method.declared(config, num_classes=classes), classes=classes)
    if reason:
        raise IncompatibleError(f"finetune.auditor={name}: {reason}")


def bind_auditor(auditor: Any, defense: Any, fed: Federation, scenario: Scenario) -> None:
    """Hand the auditor the bound defense, the labels the active party trains with (a label defense's, where one ran)
    with the canaries' hidden, and the canaries' ids."""
    labels = fed.active.labels.clone()
    labels[scenario.canaries.to(labels.device)] = -1
    auditor.bind(defense, labels=labels, canaries=scenario.canaries, classes=fed.num_classes,
                 candidates=scenario.canary_candidates.to(labels.device))


def score_auditor(records: list[RunRecord], name: str, auditor: Any, scenario: Scenario, *, delta: float,
                  shares: tuple[float, ...] = KEEP) -> None:
    """The auditor's guesses of every canary scored against their drawn labels (read here, never handed to it): the
    counts of its abstention menu ``shares`` (:func:`auditor_menu`, read in planning) and the 95% lower bound they
    certify at ``delta``, on every record of the training."""
    guess, confidence = auditor.guesses()
    problem = _guesses_problem(guess, confidence, int(scenario.canaries.numel()))
    if problem:
        for record in records:
            record.notes = "; ".join(filter(None, [record.notes, f"auditor {name}: its {problem}, so it certifies "
                                                   "nothing here"]))
        return
    counts = menu_counts(guess == scenario.canary_labels, confidence, shares=shares)
    classes, planted = int(scenario.canary_candidates.shape[1]), int(scenario.canaries.numel())
    bound, kept = menu_lower(counts, canaries=planted, classes=classes, delta=delta)
    right = next(r for g, r in counts if g == kept)
    fdp = fdp_bounds(counts, canaries=planted, classes=classes, delta=delta)
    for record in records:
        record.auditor, record.auditor_counts = name, json.dumps(counts)
        record.auditor_guesses, record.auditor_accuracy, record.auditor_epsilon_lower = kept, right / kept, bound
        record.auditor_epsilon_fdp, record.auditor_mu_lower, record.auditor_epsilon_gdp_estimate = fdp


def auditor_menu(auditor: Any, name: str) -> tuple[float, ...]:
    """The shares of its most confident guesses ``auditor`` is scored with, read once in planning, before any
    training, so that the menu (and the Bonferroni correction over it) is fixed before the run whatever the auditor
    does later (the f-DP and Steinke bounds need each entry's count fixed in advance); the standard menu for a plugin
    without ``menu``. One error where it is not a method returning a tuple of shares in (0, 1]."""
    menu = getattr(auditor, "menu", None)
    if menu is None:
        return KEEP
    shares = menu() if callable(menu) else menu
    if not callable(menu) or not (isinstance(shares, tuple) and shares and all(
            isinstance(x, float | int) and not isinstance(x, bool) and 0 < x <= 1 for x in shares)):
        raise IncompatibleError(f"finetune.auditor={name}: its menu must be a method returning a tuple of shares in "
                                f"(0, 1] (the abstention menu its guesses are scored with), got {shares!r:.60}")
    return tuple(float(x) for x in shares)


def _guesses_problem(guess: Any, confidence: Any, canaries: int) -> str:
    """Why an auditor's guesses cannot be scored ('' where they can): one integer label and one finite confidence
    per canary (a single guess would broadcast over every canary, a shorter confidence would sort another menu)."""
    if not (isinstance(guess, torch.Tensor) and isinstance(confidence, torch.Tensor)) or guess.shape != (canaries,) \
            or confidence.shape != (canaries,):
        shapes = [tuple(t.shape) if isinstance(t, torch.Tensor) else class_named(t) for t in (guess, confidence)]
        return f"guesses are not one guess per canary ({canaries}; got guesses {shapes[0]}, confidences {shapes[1]})"
    if guess.is_floating_point() or guess.is_complex() or guess.dtype == torch.bool:
        return f"guesses are {guess.dtype}, not integer labels"
    if not bool(torch.isfinite(confidence).all()):
        return "scores are not finite"
    return ""
