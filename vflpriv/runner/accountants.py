"""A stored epsilon recomputed wherever a record is read (task epsread): each DP defense's accountant, the one its run
used, run again on what the record's settings fix (the noise multiplier or the epsilon, delta) and on the count a run of
those settings composes (``Accountant.planned_count``, review fin17 F1: a count read from the record let an edit lower
it with its epsilon). The record's ``epsilon_accounting`` (written by :func:`accounting_of`) holds one entry per
defense whose class claims a secret, void ones too (review fin17 F2), each with that count; a record whose entries or
epsilon or delta differ is damaged (a hand edit): left out of the tables, recomputed on resume. When a run is
recorded, the count its accountant really composed is compared with the planned one (:func:`recounted`): a difference
voids the claim (its note names both), so no recorded epsilon rests on another count than its settings state. A void
claim leaves its secret with no epsilon (``claims.composed``: basic composition needs a bound on every release).
Where a defense or the method of a record's settings is not known here (a plugin not importable), or the method is a
plugin's, the entries that can be judged are, and the record's epsilons are read as none, with a warning
(:func:`unjudged`: review acct F2), never shown unjudged.

The counts (the worst training row's; each argument in its defense's module docstring):

- Where they hold. The method's finetuning is the shared loop (``methods/finetune.finetune``) run once
  (:data:`SHARED_ONCE`: ``Method.finetune``, and VFLHLP's, which calls it once after its own steps): it trains on the
  labeled aligned ids for ``epochs`` epochs, each shuffled into batches that hold every id once (``index_batches``:
  no id dropped, none repeated), and follows every exchange with ``local_updates - 1`` FedBCD updates on the same
  batch. Any other method's finetuning (one-shot VFL's, SS-VFL's, the local baselines', a plugin's) has a count
  vflpriv does not state: its run records no epsilon and says why (its claims are void there anyway but for a plugin).
- dp-gaussian: each update of the active party (an exchange's and each local update's) passes every row of its batch
  through ``backward`` once, so every trained row is read ``epochs * local_updates`` times, and no other code reads a
  label in that loop (``covers``); the validation rows are held out (0), canaries are trained rows (the same count).
  ``target_epsilon`` is solved over the same count (``bind``).
- embedding-dp: per guarded party (every passive one, party unset; else one), a trained row is released once per
  exchange (one embedding message per batch; FedBCD's local updates send nothing) and, with ``private_bottom``, is in
  one DP-SGD step per exchange and per local update: ``parties * epochs * (1 + local_updates)``, or
  ``parties * epochs`` without DP-SGD (no training epsilon then anyway). Other releases of training rows are at
  inference: the validation rows (held out of training) once, and per epoch with ``finetune.curve``: at most
  ``epochs + 1`` for one party, below a trained row's count, so never the worst row's. Test rows carry no training
  sample's id (their own per-release note).
- The comparison at record time is what makes these exact rather than assumed: a loop that composes a different count
  (an acting attack's, a frozen bottom's, code not read here) records no epsilon for it."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from vflpriv.common.components import built
from vflpriv.common.errors import VflprivError, type_named
from vflpriv.common.secret_kinds import FEATURES, LABELS
from vflpriv.config.parse import parse_options
from vflpriv.config.registry import DEFENSES, METHODS
from vflpriv.config.schema import DefenseConfig, FinetuneConfig, RunConfig
from vflpriv.defenses.alibi import Alibi
from vflpriv.defenses.dp_gaussian import GaussianDP, label_reads, spent, uses_outside_loop
from vflpriv.defenses.embedding_dp import EmbeddingDP
from vflpriv.defenses.embedding_dp_accounting import gaussian_epsilon
from vflpriv.defenses.label_dp import LabelDP
from vflpriv.methods.base import Method
from vflpriv.methods.vflhlp import VFLHLP
from vflpriv.runner.claims import Verdict, accounting_class, claim_secrets, foreign_accounting
from vflpriv.runner.naming import CLAIMS, TOLERANCE, guards_record, solved_sigma
from vflpriv.store.records import CLAIM_VERSION

#: The most characters one defense's entry of ``epsilon_accounting`` takes (about 70 as written): a longer field is
#: damage, never parsed.
ENTRY_CHARS = 128


@lru_cache(maxsize=4096)
def _spent(sigma: float, delta: float, uses: int) -> float:
    """dp-gaussian's accountant (``dp_gaussian.spent``), once per distinct input: a store holds many seeds of each."""
    return spent(sigma, delta=delta, uses=uses)


@lru_cache(maxsize=4096)
def _gaussian(multiplier: float, steps: int, delta: float) -> float:
    """embedding-dp's accountant (``gaussian_epsilon``), once per distinct input."""
    return gaussian_epsilon(multiplier, steps, delta=delta)


def _dp_gaussian(cls: type, strength: float, finetune: FinetuneConfig, options: dict, count: int) -> tuple:
    """Opacus' RDP epsilon of the most-read label's ``count`` uses at the sigma the run noised with: its strength, or
    the one ``GaussianDP.bind`` solves for ``target_epsilon`` over the finetuning's updates."""
    o = cls.Options.model_validate(options)
    sigma = strength if o.target_epsilon is None else solved_sigma(o, finetune)
    return _spent(sigma, o.delta, count), float(o.delta)


def _embedding_dp(cls: type, strength: float, finetune: FinetuneConfig, options: dict, count: int) -> tuple:
    """Opacus' RDP epsilon of the worst training row's ``count`` mechanisms, each of multiplier sigma / 2."""
    o = cls.Options.model_validate(options)
    return _gaussian(strength / 2.0, count, o.delta), float(o.delta)


#: The finetuning functions read to run the shared loop once from epoch 0 (the counts above hold there only).
SHARED_ONCE = (Method.finetune, VFLHLP.finetune)


@lru_cache(maxsize=256)
def _finetuned_by(method: str) -> str:
    """'' where the method registered as ``method`` finetunes by the shared loop run once (:data:`SHARED_ONCE`), else
    why no count is stated for it; once per name (a read judges every record); VflprivError for a method unknown."""
    cls = METHODS.get(method)
    owner = next(k for k in cls.__mro__ if "finetune" in vars(k))
    if any(vars(owner)["finetune"] is shared for shared in SHARED_ONCE):  # ``in`` ran a plugin's ``__eq__``
        return ""
    return (f"method {method} finetunes by its own code ({owner.__qualname__}.finetune), for which vflpriv states no "
            "count of a row's mechanisms")


def _label_uses(cfg: RunConfig, d: DefenseConfig) -> int:
    """dp-gaussian: each trained label is read once per update, ``epochs * local_updates`` (see the module's note)."""
    return label_reads(cfg.finetune)


def _row_mechanisms(cfg: RunConfig, d: DefenseConfig) -> int:
    """embedding-dp: per guarded party, a trained row's releases (one an epoch) and DP-SGD steps (one an update)."""
    f, o = cfg.finetune, EmbeddingDP.Options.model_validate(d.options)
    parties = cfg.partition.parties - 1 if d.party is None else 1
    return parties * f.epochs * (1 + f.local_updates * o.private_bottom)


def _label_void(cfg: RunConfig, d: DefenseConfig, method: Method) -> str:
    """Why the settings alone void dp-gaussian's claim (``GaussianDP.covers``: a label use outside the loop), or ''."""
    return "; ".join(uses_outside_loop(method))


def _feature_void(cfg: RunConfig, d: DefenseConfig, method: Method) -> str:
    """Why the settings alone void embedding-dp's claim (``EmbeddingDP.covers`` and ``bind``), or ''."""
    o = EmbeddingDP.Options.model_validate(d.options)
    return "; ".join([*method.feature_uses(), *method.undeclared_feature_uses(),
                      *(["options.private_bottom=false"] if not o.private_bottom else []),
                      *(["finetune.bn_recalibrate=true"] if cfg.finetune.bn_recalibrate else [])])


def _settings_fixed(cls: type, strength: float, finetune: FinetuneConfig, options: dict, count: None) -> tuple:
    """The claim its settings fix (randomised response's and ALIBI's epsilon: the strength)."""
    return cls.claimed_epsilon(strength, finetune=finetune, options=options)


@dataclass(frozen=True)
class Accountant:
    """How a DP defense's accounting class computes its epsilon: the count an instance composed (``count``, read after
    training as its ``privacy_spent`` reads it; None where the settings fix the epsilon), the count the shared loop
    composes under given settings (``loop_count``: of the run's and the defense's settings; :meth:`planned_count`),
    the (epsilon, delta) from the defense's class, strength, finetuning, options and that count (``epsilon``), and why
    the settings alone void its claim (``settings_void``: the part of its ``covers`` they decide; review acct F3)."""

    count: Callable[[Any], int] | None
    epsilon: Callable[..., tuple[float, float] | None]
    loop_count: Callable[[RunConfig, DefenseConfig], int] | None = None
    settings_void: Callable[[RunConfig, DefenseConfig, Method], str] | None = None

    def planned_count(self, cfg: RunConfig, d: DefenseConfig) -> int | str:
        """The count a run of ``cfg`` composes for its defense ``d`` (a str: why none is stated): the shared loop's,
        where its method finetunes by it once (:func:`_finetuned_by`; VflprivError for a method unknown here)."""
        return _finetuned_by(cfg.method.name) or self.loop_count(cfg, d)


#: Each vflpriv accounting class (``claims.accounting_class``) and its accountant.
ACCOUNTANTS: dict[type, Accountant] = {
    GaussianDP: Accountant(lambda d: int(d.uses.max()), _dp_gaussian, _label_uses, _label_void),
    EmbeddingDP: Accountant(lambda d: d.uses(), _embedding_dp, _row_mechanisms, _feature_void),
    LabelDP: Accountant(None, _settings_fixed),
    Alibi: Accountant(None, _settings_fixed)}


def recounted(cfg: RunConfig) -> Callable[[int, Any], str]:
    """For a run of ``cfg``: why the claim of its defense ``i`` (built, trained) voids because the count its accountant
    composed is not the one its settings state (``Accountant.planned_count``), or ''."""
    def why(i: int, d: Any) -> str:
        accountant = ACCOUNTANTS.get(accounting_class(d))
        if accountant is None or accountant.count is None:
            return ""
        want, found = accountant.planned_count(cfg, cfg.defenses[i]), accountant.count(d)
        if isinstance(want, str):
            return f"its accountant's count ({found}) is not checked against its settings: {want}"
        return "" if found == want else (
            f"its accountant composed {found} mechanisms for the worst training row, where a run of its settings "
            f"composes {want}: its epsilon would rest on a count its settings do not state")
    return why


def accounting_of(defenses: list, judgement: tuple[Verdict, ...], cfg: RunConfig) -> str:
    """What a training's records hold of its claims (``RunRecord.epsilon_accounting``): per defense whose class claims
    a secret (its :class:`claims.Verdict`, the one ``record_claims`` wrote from), void ones too (``"void": true``: they
    leave their secret without an epsilon, :func:`claims.composed`), its index, revision, secret and the count its
    settings state (:attr:`Accountant.planned_count`; None where they fix the epsilon or state none)."""
    entries = []
    for d, v in zip(defenses, judgement):
        if v.secrets:
            accountant = ACCOUNTANTS.get(accounting_class(d))
            planned = None if accountant is None or accountant.count is None else \
                accountant.planned_count(cfg, cfg.defenses[v.index])
            entries.append({"defense": v.index, "revision": int(d.revision),
                            "secret": LABELS if v.secrets == {LABELS} else FEATURES,
                            "count": planned if type(planned) is int else None, **({"void": True} if v.void else {})})
    return json.dumps(entries)


def miscounted(record, cfg: RunConfig, method: Method | None = None) -> str:
    """Which epsilon (or delta) of ``record`` its accountants do not give from its settings ``cfg`` and the counts it
    holds, or ''; what the settings void judged with ``method`` (else vflpriv's own, built: :func:`_method`). Not
    judged (''): an earlier claim rules' epsilon (withheld anyway), one of a defense unknown here or without an
    accountant."""
    if record.claim_version != CLAIM_VERSION:
        return ""
    if len(record.epsilon_accounting) > ENTRY_CHARS * (len(cfg.defenses) + 1):
        return f"its epsilon_accounting is not one a run writes ({len(record.epsilon_accounting)} characters)"
    try:
        expected = _expected(record, cfg, method)
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


def _planned(accountant: Accountant, cfg: RunConfig, d: DefenseConfig, count: Any) -> int | str:
    """:meth:`Accountant.planned_count`; where the method is unknown here, the shared loop's count if the entry states
    one (a run writes one only there; its epsilon withheld: :func:`unjudged`), else why none is (review acct F2)."""
    try:
        return accountant.planned_count(cfg, d)
    except VflprivError as exc:
        return accountant.loop_count(cfg, d) if type(count) is int else f"its method is unknown here ({exc})"


def _settings_void(accountant: Accountant, cfg: RunConfig, d: DefenseConfig, method: Method | None) -> str:
    """Why the settings alone void the claim (:attr:`Accountant.settings_void`) judged with ``method`` (None: vflpriv's
    own, built), or '' (also where the method is not built here: :func:`unjudged` withholds its epsilon)."""
    if accountant.settings_void is not None and method is None:
        method = _method(cfg)
    return "" if method is None else accountant.settings_void(cfg, d, method)


def _close(found: float, want: float) -> bool:
    """Equal within :data:`TOLERANCE`, or both NaN (no claim)."""
    return (math.isnan(found) and math.isnan(want)) or math.isclose(found, want, rel_tol=TOLERANCE, abs_tol=1e-15)


def _expected(record, cfg: RunConfig, method: Method | None) -> dict[tuple[str, str], tuple[float, float]]:
    """Per (epsilon, delta) fields of ``record`` it checks, the claim its accountants give (NaN: none), composed as
    ``claims.record_claims`` composes them (they add; a void one leaves none: ``claims.composed``); raises VflprivError
    where it cannot recompute them, ValueError where no run writes its entries (one per claiming defense, in order)."""
    if not record.epsilon_accounting:  # every run of the current claim rules writes it, "[]" where nothing is claimed
        if any(not math.isnan(getattr(record, epsilon)) for epsilon, _ in PAIRS.values()):
            raise ValueError("it carries an epsilon without its accountants' entries")
        return {}
    entries = json.loads(record.epsilon_accounting)
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        raise ValueError("not a JSON list of entries")
    named = [entry.get("defense") for entry in entries]
    classes = [_defense(d.name) for d in cfg.defenses]
    unknown = [i for i, cls in enumerate(classes) if cls is None]  # whether they claim: judged by nobody here
    claiming = [i for i, cls in enumerate(classes) if cls is not None and claim_secrets(cls)]
    if (not all(type(i) is int for i in named) or named != sorted(set(named))
            or [i for i in named if i not in unknown] != claiming):  # one per claiming defense, void too (fin17 F2)
        raise ValueError(f"it names defenses {str(named):.40}, where its settings' claiming defenses are {claiming}"
                         + (f" and any of the unknown {unknown}" if unknown else ""))
    claims: dict[str, list] = {LABELS: [], FEATURES: []}
    for entry in entries:
        secret, claim = (entry["secret"], UNKNOWN) if entry["defense"] in unknown else \
            _recomputed(entry, record, cfg, method)
        if claim is not None:
            claims[secret].append(claim)  # KeyError: an unknown defense's entry of no secret a run records
    return {PAIRS[secret]: _sum(found) for secret, found in claims.items() if UNKNOWN not in found}


def _defense(name: str) -> type | None:
    """The defense class registered as ``name``, or None where it is unknown here."""
    try:
        return DEFENSES.get(name)
    except VflprivError:
        return None


@lru_cache(maxsize=256)
def _built(name: str, options: str) -> Method | None:
    """The method ``name`` built with ``options`` (JSON) as planning builds it, once; None where it is not importable
    here or does not build (planning says why)."""
    try:
        cls = METHODS.get(name)
        return built("method", name, lambda: cls(parse_options(cls, json.loads(options), where="method.options")))
    except VflprivError:
        return None


def _options(cfg: RunConfig) -> str:
    """``cfg``'s method options as :func:`_built` keys them."""
    return json.dumps(cfg.method.options, sort_keys=True)


def _method(cfg: RunConfig) -> Method | None:
    """vflpriv's own method of ``cfg``, built; None for a plugin's (its declared uses are its code, not run where
    records are read: :func:`unvoided` runs it where a resume runs it anyway)."""
    return _built(cfg.method.name, _options(cfg)) if METHODS.builtin(cfg.method.name) else None


def unjudged(record, cfg: RunConfig) -> str:
    """Why a read withholds ``record``'s epsilons (shown as none, with a warning) rather than show them unjudged, or
    '': a defense of its settings ``cfg`` unknown here (it may claim a secret: a claim deleted with its entry would
    pass), or a method unknown here or a plugin's beside a claim its method may void (whether it finetunes by the
    shared loop, what its settings void: its code, not run at read; an entry un-voided would pass: review acct F2, F3).
    The entries that can be judged are (:func:`miscounted`)."""
    if record.claim_version != CLAIM_VERSION or all(math.isnan(getattr(record, e)) for e, _ in PAIRS.values()):
        return ""
    classes = [_defense(d.name) for d in cfg.defenses]
    if None in classes:
        unknown = ", ".join(d.name for d, cls in zip(cfg.defenses, classes) if cls is None)
        return f"epsilon withheld: defense {unknown} is not known here, so no read checks that its claims are counted"
    judged_by_method = [type_named(cls) for cls in classes if claim_secrets(cls)
                        and getattr(ACCOUNTANTS.get(accounting_class(cls)), "loop_count", None) is not None]
    if judged_by_method and _method(cfg) is None:
        return (f"epsilon withheld: method {cfg.method.name} is not vflpriv's own or not known here, so no read judges "
                f"whether its settings void the claim of {', '.join(judged_by_method)}")
    return ""


def unvoided(record, cfg: RunConfig) -> str:
    """:func:`miscounted` of a record of a plugin method, what its settings void judged with the method as its run
    builds it, or '': where a resume plans ``cfg`` and runs the plugin's code anyway (review hunt3 P12: an entry
    un-voided, its epsilon withheld where read, was resumed as the run's). vflpriv's own are judged by every read."""
    if METHODS.builtin(cfg.method.name) or (method := _built(cfg.method.name, _options(cfg))) is None:
        return ""
    return miscounted(record, cfg, method)


#: An entry's claim where its run voided it (``"void": true``).
VOID = "void"
#: An entry's claim of a defense unknown here: its secret's sum is not checked (its epsilon withheld: :func:`unjudged`).
UNKNOWN = "unknown"


def _sum(claims: list) -> tuple[float, float]:
    """(epsilon, delta) of ``claims`` by basic composition, as ``record_claims`` adds them; NaN where none or one is
    :data:`VOID`."""
    if not claims or VOID in claims:
        return math.nan, math.nan
    return sum(e for e, _ in claims), sum(d for _, d in claims)


def _recomputed(entry: dict, record, cfg: RunConfig, method: Method | None
                ) -> tuple[str, tuple[float, float] | str | None]:
    """One entry's secret and claim, recomputed from the count its settings state (:data:`VOID` where its run voided
    it; None: at the identity, or a feature claim of a defense not guarding the record's victim, which
    ``record_claims`` leaves out); ValueError where no run writes it."""
    i, secret, count, void = entry["defense"], entry["secret"], entry["count"], entry.get("void", False)
    d = cfg.defenses[i]
    cls = DEFENSES.get(d.name)  # known: :func:`_expected` left out the unknown
    if foreign_accounting(cls, d.name):  # judged on the class before any of its code runs: a plugin's, not judged
        raise VflprivError(f"defense {i} ({d.name}): its accounting is a plugin's code, not run where records are read")
    if secret not in PAIRS or not CLAIMS[PAIRS[secret][0]](claim_secrets(cls)):
        raise ValueError(f"defense {i} ({d.name}) records no {secret!r:.20} epsilon")
    accountant = ACCOUNTANTS.get(accounting_class(cls))
    revision = entry["revision"]  # an int, as a run writes it: 1.0 and true equal 1 (review hunt3 P1)
    if type(revision) is not int or revision != cls.revision:  # a change to an accountant bumps CLAIM_VERSION
        raise ValueError(f"defense {i} ({d.name}) is of revision {revision!r:.20}, not the current "
                          f"code's {cls.revision}")
    if accountant is None:
        raise VflprivError(f"defense {i} ({d.name}): its accountant is not known here")
    if void is not True and void is not False:
        raise ValueError(f"defense {i} ({d.name}) is void {void!r:.20}")
    planned = None if accountant.count is None else _planned(accountant, cfg, d, count)
    stated = planned if type(planned) is int else None
    if type(count) is not type(stated) or count != stated:
        raise ValueError(f"defense {i} ({d.name}) counts {count!r:.20}, where a run of its settings composes {stated}")
    strength = cls.axis.identity if d.strength is None else d.strength
    identity = strength == cls.axis.identity and not cls.own_strength_option(d.options)  # the defense absent
    if not (void or identity) and isinstance(planned, str):
        raise ValueError(f"defense {i} ({d.name}) records an epsilon where a run of its settings records none: "
                         f"{planned}")
    if not (void or identity) and (why := _settings_void(accountant, cfg, d, method)):
        raise ValueError(f"defense {i} ({d.name}) is not void, where its settings void its claim: {why:.80}")
    try:
        if secret == FEATURES and not guards_record(d, record.victim):
            return secret, None
    except VflprivError as exc:  # settings no run of the current code builds: none wrote this entry
        raise ValueError(f"defense {i} ({d.name}) cannot be built from its settings ({exc})") from exc
    if void or identity:
        return secret, VOID if void else None
    return secret, accountant.epsilon(cls, strength, cfg.finetune, d.options, planned)
