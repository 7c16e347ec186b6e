"""A stored epsilon recomputed wherever a record is read (task epsread): each DP defense's accountant, the one its run
used, run again on what the record's settings fix (the noise multiplier or the epsilon, delta) and on the count it
composed, which the record holds (``RunRecord.epsilon_accounting``, written by :func:`accounting_of`). A record whose
epsilon or delta differs is damaged (a hand edit): left out of the tables, recomputed on resume."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from vflpriv.common.errors import VflprivError
from vflpriv.common.secret_kinds import FEATURES, LABELS
from vflpriv.config.registry import DEFENSES
from vflpriv.config.schema import FinetuneConfig, RunConfig
from vflpriv.defenses.alibi import Alibi
from vflpriv.defenses.dp_gaussian import GaussianDP, noise_for, spent
from vflpriv.defenses.embedding_dp import EmbeddingDP
from vflpriv.defenses.embedding_dp_accounting import gaussian_epsilon
from vflpriv.defenses.label_dp import LabelDP
from vflpriv.runner.claims import Verdict, accounting_class, foreign_accounting
from vflpriv.runner.naming import CLAIMS, guards_record, secrets_claimed
from vflpriv.store.records import CLAIM_VERSION

#: The most characters one defense's entry of ``epsilon_accounting`` takes (about 70 as written): a longer field is
#: damage, never parsed.
ENTRY_CHARS = 128

#: How close a recomputed epsilon or delta must be to the stored one (the same code on other hardware: float rounding).
TOLERANCE = 1e-9


@lru_cache(maxsize=4096)
def _spent(sigma: float, delta: float, uses: int) -> float:
    """dp-gaussian's accountant (``dp_gaussian.spent``), once per distinct input: a store holds many seeds of each."""
    return spent(sigma, delta=delta, uses=uses)


@lru_cache(maxsize=1024)
def _noise_for(target: float, delta: float, uses: int) -> float:
    """The sigma ``GaussianDP.bind`` solves for a target epsilon, once per distinct input (a solver: the dearest)."""
    return noise_for(target, delta=delta, uses=uses)


@lru_cache(maxsize=4096)
def _gaussian(multiplier: float, steps: int, delta: float) -> float:
    """embedding-dp's accountant (``gaussian_epsilon``), once per distinct input."""
    return gaussian_epsilon(multiplier, steps, delta=delta)


def _dp_gaussian(cls: type, strength: float, finetune: FinetuneConfig, options: dict, count: int) -> tuple:
    """Opacus' RDP epsilon of the most-read label's ``count`` uses at the sigma the run noised with: its strength, or
    the one ``GaussianDP.bind`` solves for ``target_epsilon`` over the finetuning's updates."""
    o = cls.Options.model_validate(options)
    sigma = strength if o.target_epsilon is None else _noise_for(o.target_epsilon, o.delta,
                                                                 finetune.epochs * finetune.local_updates)
    return _spent(sigma, o.delta, count), float(o.delta)


def _embedding_dp(cls: type, strength: float, finetune: FinetuneConfig, options: dict, count: int) -> tuple:
    """Opacus' RDP epsilon of the worst training row's ``count`` mechanisms, each of multiplier sigma / 2."""
    o = cls.Options.model_validate(options)
    return _gaussian(strength / 2.0, count, o.delta), float(o.delta)


def _settings_fixed(cls: type, strength: float, finetune: FinetuneConfig, options: dict, count: None) -> tuple:
    """The claim its settings fix (randomised response's and ALIBI's epsilon: the strength)."""
    return cls.claimed_epsilon(strength, finetune=finetune, options=options)


@dataclass(frozen=True)
class Accountant:
    """How a DP defense's accounting class computes its epsilon: what of an instance the record holds (``count``, read
    after training as its ``privacy_spent`` reads it; None where the settings fix the epsilon), the (epsilon,
    delta) from the defense's class, strength, finetuning, options and that count (``epsilon``), and the largest count
    a run of a finetuning writes (``most``; None: no bound from the settings)."""

    count: Callable[[Any], int] | None
    epsilon: Callable[..., tuple[float, float] | None]
    most: Callable[[FinetuneConfig], int] | None = None


#: Each vflpriv accounting class (``claims.accounting_class``) and its accountant.
ACCOUNTANTS: dict[type, Accountant] = {
    GaussianDP: Accountant(lambda d: int(d.uses.max()), _dp_gaussian, lambda f: f.epochs * f.local_updates),
    EmbeddingDP: Accountant(lambda d: d.uses(), _embedding_dp),
    LabelDP: Accountant(None, _settings_fixed),
    Alibi: Accountant(None, _settings_fixed)}


def accounting_of(defenses: list, judgement: tuple[Verdict, ...]) -> str:
    """What a training's records hold of its claims (``RunRecord.epsilon_accounting``): per defense whose epsilon they
    record (its :class:`claims.Verdict`, the one ``record_claims`` wrote from), its index, revision, secret and its
    accountant's count."""
    entries = []
    for d, v in zip(defenses, judgement):
        if v.epsilon is not None and v.secrets:
            accountant = ACCOUNTANTS.get(accounting_class(d))
            count = accountant.count(d) if accountant is not None and accountant.count is not None else None
            entries.append({"defense": v.index, "revision": int(d.revision),
                            "secret": LABELS if v.secrets == {LABELS} else FEATURES, "count": count})
    return json.dumps(entries)


def miscounted(record, cfg: RunConfig) -> str:
    """Which epsilon (or delta) of ``record`` its accountants do not give from its settings ``cfg`` and the counts it
    holds, or ''. Not judged (''): an earlier claim rules' epsilon (withheld anyway), one of a defense unknown here
    or without an accountant."""
    if record.claim_version != CLAIM_VERSION:
        return ""
    if len(record.epsilon_accounting) > ENTRY_CHARS * (len(cfg.defenses) + 1):
        return f"its epsilon_accounting is not one a run writes ({len(record.epsilon_accounting)} characters)"
    try:
        expected = _expected(record, cfg)
    except VflprivError:
        return ""
    except Exception as exc:  # noqa: BLE001 - the field edited into another shape (a nesting deep enough to recurse)
        return f"its epsilon_accounting is not one a run writes ({exc})"
    for (epsilon, delta), (want, want_delta) in expected.items():
        found, found_delta = getattr(record, epsilon), getattr(record, delta)
        if not (_close(found, want) and _close(found_delta, want_delta)):
            return (f"its {epsilon} ({found:.6g}) and {delta} ({found_delta:.6g}) are not what its defenses' "
                    f"accountants give from its settings and counts ({want:.6g}, {want_delta:.6g})")
    return ""


#: Each secret's (epsilon, delta) fields of a record.
PAIRS = {LABELS: ("epsilon", "epsilon_delta"), FEATURES: ("epsilon_features", "epsilon_features_delta")}


def _close(found: float, want: float) -> bool:
    """Equal within :data:`TOLERANCE`, or both NaN (no claim)."""
    return (math.isnan(found) and math.isnan(want)) or math.isclose(found, want, rel_tol=TOLERANCE, abs_tol=1e-15)


def _expected(record, cfg: RunConfig) -> dict[tuple[str, str], tuple[float, float]]:
    """Per (epsilon, delta) fields of ``record`` it checks, the claim its accountants give (NaN: none), composed as
    ``claims.record_claims`` composes them (they add); raises VflprivError where it cannot recompute them."""
    if not record.epsilon_accounting:  # every run of the current claim rules writes it, "[]" where nothing is claimed
        if any(not math.isnan(getattr(record, epsilon)) for epsilon, _ in PAIRS.values()):
            raise ValueError("it carries an epsilon without its accountants' entries")
        return {}
    entries = json.loads(record.epsilon_accounting)
    if not isinstance(entries, list):
        raise ValueError(f"a JSON {type(entries).__name__}, not a list")
    claims: dict[str, list] = {LABELS: [], FEATURES: []}
    for entry in entries:
        secret, claim = _recomputed(entry, record, cfg)
        if claim is not None:
            claims[secret].append(claim)
    return {PAIRS[secret]: _sum(found) for secret, found in claims.items()}


def _sum(claims: list[tuple[float, float]]) -> tuple[float, float]:
    """(epsilon, delta) of ``claims`` by basic composition, as ``record_claims`` adds them; NaN where none."""
    return (sum(e for e, _ in claims), sum(d for _, d in claims)) if claims else (math.nan, math.nan)


def _recomputed(entry: dict, record, cfg: RunConfig) -> tuple[str, tuple[float, float] | None]:
    """One entry's secret and claim, recomputed (None: a feature claim of a defense not guarding the record's victim,
    which ``record_claims`` leaves out); ValueError where no run writes it."""
    i, secret, count = entry["defense"], entry["secret"], entry["count"]
    if type(i) is not int or not 0 <= i < len(cfg.defenses):
        raise ValueError(f"it names defense {i!r:.20} of {len(cfg.defenses)}")
    d = cfg.defenses[i]
    cls = DEFENSES.get(d.name)
    if foreign_accounting(cls, d.name):  # judged on the class before any of its code runs: a plugin's, not judged
        raise VflprivError(f"defense {i} ({d.name}): its accounting is a plugin's code, not run where records are read")
    if secret not in PAIRS or not CLAIMS[PAIRS[secret][0]](secrets_claimed(cls)):
        raise ValueError(f"defense {i} ({d.name}) records no {secret!r:.20} epsilon")
    accountant = ACCOUNTANTS.get(accounting_class(cls))
    if entry["revision"] != cls.revision:  # a change to an accountant bumps CLAIM_VERSION: this one is the rule
        raise ValueError(f"defense {i} ({d.name}) is of revision {entry['revision']!r:.20}, not the current "
                         f"code's {cls.revision}")
    if accountant is None:
        raise VflprivError(f"defense {i} ({d.name}): its accountant is not known here")
    if (count is None) != (accountant.count is None) or not (count is None or type(count) is int and count >= 1
                                                             and (accountant.most is None
                                                                  or count <= accountant.most(cfg.finetune))):
        raise ValueError(f"defense {i} ({d.name}) counts {count!r:.20}, which no run of its settings writes")
    try:
        if secret == FEATURES and not guards_record(d, record.victim):
            return secret, None
    except VflprivError as exc:  # settings no run of the current code builds: none wrote this entry
        raise ValueError(f"defense {i} ({d.name}) cannot be built from its settings ({exc})") from exc
    return secret, accountant.epsilon(cls, cls.axis.identity if d.strength is None else d.strength, cfg.finetune,
                                      d.options, count)
