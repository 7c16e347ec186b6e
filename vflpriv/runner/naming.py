"""What a run's record names of it (method, dataset, attack, swept defense, phase, strength, seed, secret and roles),
from its settings in one place: written into each new record (``execution.blank_record``) and compared with a stored
record's own settings wherever one is read (tables, resume), so that a coordinate edited by hand reads as a damaged
record, not as another run (review hunt H5); likewise an epsilon no defense of its settings can claim (H6), a
feature epsilon at a victim no feature-claiming defense of its settings guards (task epsread), and settings that do not
hash to the record's key (hunt3 P1: the settings an epsilon is recomputed from are the key's run's); a strength an
option sets, and the swept axis, other than its settings' (hunt3 P11)."""

from __future__ import annotations

import itertools
import json
import math
from functools import lru_cache
from typing import Any

import torch

from vflpriv.common.errors import VflprivError
from vflpriv.common.secret_kinds import FEATURES, LABELS
from vflpriv.config.parse import parse_options
from vflpriv.config.keys import code_mark, config_hash, keyed
from vflpriv.config.registry import ATTACKS, AUDITORS, DEFENSES, METHODS
from vflpriv.config.schema import DefenseConfig, RunConfig
from vflpriv.config.sweep import own_strength_option
from vflpriv.defenses.dp_gaussian import GaussianDP, label_reads, noise_for
from vflpriv.engine import SERVER
from vflpriv.engine.roles import PASSIVE
from vflpriv.runner.adversaries import parties_of
from vflpriv.runner.claims import claim_secrets, foreign_accounting, guards_victim  # record_claims' own rules
from vflpriv.store.records import CLAIM_VERSION, RunRecord

#: Each epsilon a record carries and whether a defense claiming ``secrets`` records it (``claims.record_claims``: a
#: label epsilon from a defense claiming the labels alone, a feature epsilon from one claiming the features).
CLAIMS = {"epsilon": lambda secrets: secrets == {LABELS}, "epsilon_features": lambda secrets: FEATURES in secrets}
#: The fields naming who attacks whom: compared only where the current code resolves them (not for an attack plugin
#: that is not installed here, whose secret it cannot know).
ROLES = ("secret", "adversary", "victim")


def _roles(cfg: RunConfig) -> tuple[str, str, str] | None:
    """(secret, adversary, victim) as a record names them, or None where the current code cannot resolve them."""
    try:
        secret = getattr(ATTACKS.get(cfg.attack.name), "secret", LABELS)
        party, victim = parties_of(cfg, secret, parties=cfg.partition.parties)
    except VflprivError:
        return None
    return secret, "server" if party == SERVER else str(party), "" if victim is None else str(victim)


def roles_of(cfg: RunConfig) -> tuple[str, str, str]:
    """(secret, adversary, victim) of a run as its record names them ("server" for the server, "" for no victim); a run
    the planner will refuse is named by what can be said of it."""
    return _roles(cfg) or (LABELS, str(cfg.partition.adversary), "")


def named(cfg: RunConfig) -> dict:
    """The fields by which a record of ``cfg`` names its run (its axis' where its swept defense is known here)."""
    swept = cfg.swept
    secret, adversary, victim = roles_of(cfg)
    return {"method": cfg.method.name, "dataset": cfg.dataset.name, "attack": cfg.attack.name,
            "defense": swept.name if swept else "+".join(d.name for d in cfg.defenses) or "none",
            "phase": cfg.attack.phase, "strength": swept.strength if swept and swept.strength is not None else 0.0,
            "seed": cfg.seed, "secret": secret, "adversary": adversary, "victim": victim,
            "canaries": cfg.partition.canaries, **_axis(cfg)}


def misnamed(record, cfg: RunConfig) -> str:
    """Which field of ``record`` names another run than its settings ``cfg`` (:func:`named`; where an option sets the
    strength, the one it resolves to: :func:`resolved`), or ''."""
    skip = set() if _roles(cfg) else set(ROLES)
    expected = named(cfg)
    if cfg.swept is not None and own_strength_option(cfg.swept):
        expected["strength"] = resolved(cfg.swept, cfg.finetune)
        skip |= {"strength"} if expected["strength"] is None else set()
    for name, value in expected.items():
        found = getattr(record, name)
        if name not in skip and _differs(found, value):  # NaN differs from every strength
            return f"its {name} is {found!r:.40}, where its settings say {value!r:.40}"
    return ""


def _differs(found: Any, value: Any) -> bool:
    """Not equal; floats beyond float rounding (a solved sigma on other hardware), NaN from every number."""
    if type(found) is float and type(value) is float:
        return not math.isclose(found, value, rel_tol=TOLERANCE)
    return found != value


#: How close a recomputed strength, epsilon or delta must be to the stored one (the same code on other hardware: float
#: rounding).
TOLERANCE = 1e-9


@lru_cache(maxsize=1024)
def _noise_for(target: float, delta: float, uses: int) -> float:
    """The sigma ``GaussianDP.bind`` solves for a target epsilon, once per distinct input (a solver: the dearest)."""
    return noise_for(target, delta=delta, uses=uses)


def solved_sigma(options: Any, finetune: Any) -> float:
    """dp-gaussian's sigma for ``options.target_epsilon`` (parsed) over the finetuning's label reads, as ``bind``."""
    return _noise_for(options.target_epsilon, options.delta, label_reads(finetune))


#: Each vflpriv defense class an option may set the strength of (``own_strength_option``) and the strength its run
#: resolves from its parsed options and finetuning.
RESOLVED = {GaussianDP: solved_sigma}


def resolved(d: DefenseConfig, finetune: Any) -> float | None:
    """The strength a run of the swept defense ``d`` resolves from the option setting it (review hunt3 P11: any sigma
    was shown beside the target's epsilon), or None where a read cannot tell: a plugin's defense (its code, not run at
    read), a strength given beside the option (no run's: :func:`refused`), options no run reads (judged elsewhere)."""
    if d.strength is not None or not DEFENSES.builtin(d.name):
        return None
    cls = DEFENSES.get(d.name)
    try:
        return RESOLVED[cls](cls.Options.model_validate(d.options), finetune)
    except ValueError:  # pydantic's ValidationError
        return None


#: The record's fields naming its swept defense's axis (its class's, as :func:`named` writes them into a new record;
#: the record's defaults where none is swept).
AXIS_FIELDS = ("strength_axis", "strength_stronger", "strength_identity")


def _axis(cfg: RunConfig) -> dict:
    """:data:`AXIS_FIELDS` as a record of ``cfg`` names them, or {} where its swept defense is unknown here (review
    hunt3 P11: an axis renamed or reversed in a record relabelled and reordered the tables' columns)."""
    if cfg.swept is None:
        return {name: getattr(RunRecord, name) for name in AXIS_FIELDS}
    try:
        axis = DEFENSES.get(cfg.swept.name).axis
    except VflprivError:
        return {}
    return dict(zip(AXIS_FIELDS, (axis.name, axis.stronger, axis.identity)))


def unclaimable(record, cfg: RunConfig) -> str:
    """Which epsilon of ``record`` no defense of its settings ``cfg`` can record (:data:`CLAIMS`: none where no class
    of the defense computes one, as nopeek's), or ''; '' where a defense is unknown here (its claims are unknown)."""
    try:
        claims = [claim_secrets(DEFENSES.get(d.name)) for d in cfg.defenses]
    except VflprivError:
        return ""
    for name, records in CLAIMS.items():
        if not math.isnan(getattr(record, name)) and not any(records(secrets) for secrets in claims):
            defenses = ", ".join(d.name for d in cfg.defenses) or "none"
            return f"it carries an {name} that no defense of its settings ({defenses}) claims"
    return ""


def unguarded(record, cfg: RunConfig) -> str:
    """Why ``record``'s feature epsilon is at a victim no defense of its settings ``cfg`` claiming the features guards
    (``claims.record_claims`` records one only there), or from settings whose defense cannot be built here (no run
    wrote it), or ''; '' where a defense is unknown here or its accounting is a plugin's (its code: not run here)."""
    if math.isnan(record.epsilon_features):
        return ""
    try:
        classes = [DEFENSES.get(d.name) for d in cfg.defenses]
    except VflprivError:
        return ""
    claiming = [(d, cls) for d, cls in zip(cfg.defenses, classes) if FEATURES in claim_secrets(cls)]
    if any(foreign_accounting(cls, d.name) for d, cls in claiming):
        return ""
    for d, _ in claiming:
        try:
            if guards_record(d, record.victim):
                return ""
        except VflprivError as exc:
            return f"it carries an epsilon_features from settings whose defense {d.name} cannot be built here ({exc})"
    return (f"it carries an epsilon_features at victim {record.victim or 'none'}, whose features no defense of its "
            f"settings claiming them ({', '.join(d.name for d, _ in claiming) or 'none'}) guards")


def guards_record(d: DefenseConfig, victim: str) -> bool:
    """Whether the defense of settings ``d``, built as the planner builds a passive party's, guards the finetuning
    features of a record's ``victim`` ("" for none): its own ``guards``, as ``record_claims`` asks it. VflprivError
    where it cannot be built here, or its accounting is a plugin's (whose code a read does not run)."""
    return _guards(d.model_dump_json(), victim)


@lru_cache(maxsize=1024)
def _guards(defense: str, victim: str) -> bool:
    """:func:`guards_record` of the defense of settings ``defense`` (JSON): built once per distinct pair."""
    d = DefenseConfig.model_validate_json(defense)
    cls = DEFENSES.get(d.name)
    if foreign_accounting(cls, d.name):
        raise VflprivError(f"defense {d.name}: its accounting is a plugin's code, not run where records are read")
    built = cls(strength=cls.axis.identity if d.strength is None else d.strength,
                party=PASSIVE if d.party is None else d.party, phase=d.phase, kinds=None,
                options=parse_options(cls, d.options, where="options"), generator=torch.Generator(), name=d.name)
    return guards_victim(built, victim)



#: The most keys tried for one record's settings: every combination of its components' revisions up to the current.
MOST_KEYS = 4096


def unkeyed(record, cfg: RunConfig) -> str:
    """Why ``record``'s settings are not those its key was made from (review hunt3 P1: a forged ``config`` gave the
    table an epsilon no run had), or ''. Under the key ``cfg`` plans (a resume), they must hash to it; read from
    another key, they must hash to it under the current code or an earlier revision of its components (an earlier
    code's record: "earlier" in the tables); '' where a component is unknown here or a plugin's code (:func:`unverified`
    withholds its epsilons)."""
    own = record.config == cfg.recorded()  # cfg's text: not parsed again
    found = cfg.key() if own else _stored_key(record.config)
    if found == record.key:
        _keyed_last[:] = [record.key, record.config, cfg] if own else []
        return ""
    if found is None:
        return "its settings are not ones the current code reads"
    if cfg.key() == record.key:
        return f"its settings hash to another run's key ({found}), not to its own ({record.key:.20})"
    return _earlier(record.key, record.config)[0]


def unverified(record, cfg: RunConfig) -> str:
    """Why a read withholds the epsilons of ``record`` (of settings ``cfg``, not damaged: :func:`unkeyed`) as settings
    it cannot match with its key (a component unknown here, or a plugin's code edited since), or ''."""
    if all(math.isnan(getattr(record, e)) for e in CLAIMS):
        return ""
    last = _keyed_last[:3]
    if (last and last[2] is cfg and last[:2] == [record.key, record.config]) or cfg.key() == record.key:
        return ""
    return _earlier(record.key, record.config)[1]


#: The last record :func:`unkeyed` found keyed as its settings ``cfg`` ([key, config, cfg]): :func:`unverified`, asked
#: next where a read judges it, does not hash them again (a read of 1000 records: about a tenth of its time).
_keyed_last: list = []


def _stored_key(config: str) -> str | None:
    """The key the current code gives the settings ``config`` (JSON; a record's), or None where it cannot read them
    (not cached: a key marks the code registered when it is made)."""
    try:
        return RunConfig.model_validate_json(config).key()
    except (VflprivError, ValueError):  # pydantic's ValidationError is a ValueError
        return None


def _earlier(key: str, config: str) -> tuple[str, str]:
    """(why damaged, why unverified) of settings ``config`` stored under ``key``, which the current code keys otherwise:
    ('', '') where ``key`` is theirs as written or as read (options at their defaults kept, ``as_read``) under
    revisions of their components up to the current ones (:data:`MOST_KEYS` tried)."""
    settings = RunConfig.model_validate_json(config)
    raw = json.loads(config)
    for dump in (settings.as_read().model_dump(mode="json"), raw if isinstance(raw, dict) else {}):
        try:
            if key in _revised(keyed({k: v for k, v in dump.items() if k != "device"})):
                return "", ""
        except Exception:  # noqa: BLE001 - settings as written in a shape no key was made of: not theirs
            continue
    if foreign := _unkeyable(settings):
        return "", (f"epsilon withheld: its settings do not hash to its key under the current code of {foreign} (a "
                    "plugin edited since, or not installed here; or the settings were edited): evaluate on this "
                    "store recomputes it")
    return (f"its settings hash to another run's key ({settings.key()}), not to its own ({key:.20}) under the current "
            "code or an earlier revision of its components"), ""


def _revised(marked: dict) -> set[str]:
    """The keys of ``marked`` (``keys.keyed``'s) with each component's revision mark at each revision up to its own."""
    parts = [p for p in [*(marked.get("defenses") or []), marked.get("method"), marked.get("attack")]
             if isinstance(p, dict)]
    marks = [p.get("revision", 0) for p in parts]
    found = set()
    for revisions in itertools.islice(itertools.product(*(
            range(r + 1) if type(r) is int and r >= 0 else (r,) for r in marks)), MOST_KEYS):
        for part, revision in zip(parts, revisions):
            part.pop("revision", None)
            part.update({"revision": revision} if revision else {})
        found.add(config_hash(marked))
    return found


def _unkeyable(settings: RunConfig) -> str:
    """The components of ``settings`` whose mark in a key the current code cannot restate, or '': one unknown here (its
    revision and code unknown), a plugin defense or auditor (its code as loaded is in the key: ``keys.code_mark``)."""
    named = [(DEFENSES, d.name) for d in settings.defenses]
    named += [(METHODS, settings.method.name), (ATTACKS, settings.attack.name)]
    named += [(AUDITORS, settings.finetune.auditor)] if settings.finetune.auditor else []
    found = []
    for registry, name in named:
        try:
            registry.get(name)
        except VflprivError:
            found.append(f"{name} (unknown here)")
            continue
        if registry in (DEFENSES, AUDITORS) and "code" in code_mark(registry, name):
            found.append(f"plugin {name}")
    return ", ".join(found)


def _out_of_range(cls: type, strength: float, options: Any, cfg: RunConfig) -> str:
    """The strength outside its axis' range (``StrengthAxis.check``, as the defense is built)."""
    try:
        cls.axis.check(value=strength, defense=cls.__name__)
    except VflprivError as exc:
        return str(exc).split(": ", 1)[-1]
    return ""


def _own_refusal(cls: type, strength: float, options: Any, cfg: RunConfig) -> str:
    """The class's own rule (``Protection.refusal``: dp-gaussian's strength beside ``target_epsilon``)."""
    return cls.refusal(strength, options)


def _delta_too_large(cls: type, strength: float, options: Any, cfg: RunConfig) -> str:
    """A delta of 1/labeled or more, which planning refuses (``defense_planning._check_delta``: delta < 1/n, n the
    training rows; the labeled rows are some of them, so 1/n <= 1/labeled): a bound known without the data."""
    delta, identity = getattr(options, "delta", None), strength == cls.axis.identity
    if delta is None or (identity and not cls.own_strength_option(options.model_dump())):
        return ""
    labeled = cfg.partition.labeled
    return "" if delta < 1 / labeled else (f"options.delta {delta:g} is not below 1/{labeled} (partition.labeled: "
                                           "as many training rows or more), which planning refuses")


#: The planning-time checks of one defense's settings that bear on its claim, re-run where a record is read.
REFUSALS = (_out_of_range, _own_refusal, _delta_too_large)


def refused(record, cfg: RunConfig) -> str:
    """Which check of :data:`REFUSALS` the settings ``cfg`` of ``record`` fail, or '': the planner refuses such a run,
    so no run of the current claim rules wrote them (review hunt3 P1: a strength beside ``target_epsilon``, and delta
    0.5, showed an epsilon). vflpriv's own defenses only (a plugin's checks are its code, not run at read); an earlier
    claim rules' record is not judged (its epsilon withheld: ``records.stale_claim``)."""
    if record.claim_version != CLAIM_VERSION:
        return ""
    for i, d in enumerate(cfg.defenses):
        if not DEFENSES.builtin(d.name):
            continue
        cls = DEFENSES.get(d.name)
        try:
            options = cls.Options.model_validate(d.options)
        except ValueError:  # pydantic's ValidationError: options no run reads, judged where its claim is recomputed
            continue
        strength = cls.axis.identity if d.strength is None else d.strength
        for check in REFUSALS:
            if why := check(cls, strength, options, cfg):
                return f"its settings are not a run's: defense {i} ({d.name}): {why}"
    return ""
