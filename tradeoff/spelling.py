"""One spelling of a run, by which the tables name, group and count its records: the rule is that a setting the planner
may resolve for itself (:data:`ATTACK_SETTINGS`, :data:`DEFENSE_SETTINGS`: unset, auto) is written at its default
wherever the planner resolves the run the same with it there.

That covers a default given (``attack.prior_ssl=own`` where auto resolves to own, ``defenses.0.party=0`` where unset
binds the active party, an audit's feature roles) and a setting the run does not read (``attack.prior_ssl`` beside the
aux prior); a defense's kinds that are no default are written in one order (:data:`ORDERED`). Where the current code
cannot resolve a setting (a plugin not installed here), it stays as written. Keys and stored records are untouched: two
spellings of one run keep their own keys, so a store resumes as it did. (An option given at its default, and a label
defense's own kinds, are dropped as the settings are validated, key included: ``config.defaults``.)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from vflpriv.common.errors import ConfigError, VflprivError
from vflpriv.common.secret_kinds import LABELS
from vflpriv.config.registry import ATTACKS, DEFENSES, METHODS
from vflpriv.config.schema import RunConfig
from vflpriv.runner.adversaries import parties_of
from vflpriv.runner.defense_planning import DEFENSE_POINTS, PASSIVE, PASSIVE_POINTS, message_kinds  # as it binds
from vflpriv.runner.accountants import miscounted, unjudged, unvoided
from vflpriv.runner.naming import misnamed, refused, unclaimable, unguarded, unkeyed, unverified
from vflpriv.runner.prior import OWN_ENCODER_PRIORS, prior_pretraining

#: What the planner resolves a setting to, given the run and where the setting is (None: the attack block; i: defense
#: i).
Resolve = Callable[[RunConfig, Any], Any]


def _secret(run: RunConfig) -> str:
    return getattr(ATTACKS.get(run.attack.name), "secret", LABELS)


def _roles(run: RunConfig, _: Any) -> tuple:
    """Who runs the attack against whom (``adversaries.parties_of``)."""
    return parties_of(run, _secret(run), parties=run.partition.parties)


def _prior_ssl(run: RunConfig, _: Any) -> str | None:
    """The pretraining behind the adversary's own encoder (``prior.prior_pretraining``); None where no prior of the
    run reads one (a feature attack's, or a label prior without an own encoder: aux, none)."""
    if _secret(run) != LABELS or run.attack.prior not in OWN_ENCODER_PRIORS:
        return None
    return prior_pretraining(run.method.name, run.attack.prior_ssl)


def _flat_prior_ssl(flat: dict[str, Any]) -> str | None:
    """:func:`_prior_ssl` of a record's flat settings (``variants.flatten``)."""
    return _ssl_of(flat["method.name"], flat["attack.name"], flat["attack.prior"], flat["attack.prior_ssl"])


@functools.lru_cache(maxsize=256)
def _ssl_of(method: str, attack: str, prior: str, prior_ssl: str) -> str | None:
    """:func:`_prior_ssl` of these settings, once per store's few combinations (a table names every record's)."""
    run = RunConfig.model_validate({"method": {"name": method},
                                    "attack": {"name": attack, "prior": prior, "prior_ssl": prior_ssl}})
    return _prior_ssl(run, None)


#: What a setting the planner resolves ran as, from a record's flat settings: what the tables show beside its value
#: (``attack.prior_ssl=auto (own)``: review var F3), where one spelling leaves it at its default.
RAN_AS: dict[str, Callable[[dict[str, Any]], Any]] = {"attack.prior_ssl": _flat_prior_ssl}


def ran_as(flat: dict[str, Any], key: str) -> str:
    """`` (own)``: what setting ``key`` of a record's flat settings ran as, where that is not its value as written
    (:data:`RAN_AS`); '' where it is, where no part of the run reads it, or where the current code cannot tell (a
    plugin not installed here, settings it cannot read)."""
    if key not in RAN_AS or not (ATTACKS.builtin(str(flat.get("attack.name")))
                                 and METHODS.builtin(str(flat.get("method.name")))):
        return ""
    try:
        ran = RAN_AS[key](flat)
    except (VflprivError, KeyError, ValueError):  # pydantic's ValidationError is a ValueError
        return ""
    return f" ({ran})" if ran is not None and ran != flat.get(key) else ""


def _bound(run: RunConfig, index: int) -> tuple:
    """The (party, kinds) defense ``index`` is built with, as ``defense_planning._defense`` binds it: at a passive
    party's points (unset: every passive party), inside the active party's training (unset: party 0, the class's
    default kinds), or on messages (``message_kinds``)."""
    d = run.defenses[index]
    cls = DEFENSES.get(d.name)
    if cls.hook_points & PASSIVE_POINTS:
        return PASSIVE if d.party is None else d.party, _held(d.kinds)
    if cls.hook_points & DEFENSE_POINTS:
        kinds = (d.kinds or list(cls.default_kinds)) if cls.supported_kinds else d.kinds
        return 0 if d.party is None else d.party, _held(kinds)
    method = METHODS.get(run.method.name)
    if not isinstance(getattr(method, "sends", None), (set, frozenset)):
        raise ConfigError(f"method '{run.method.name}' sets what it sends per instance: unknown here")
    party, kinds = message_kinds(cls, method, party=d.party, phase=d.phase, kinds=d.kinds, name=d.name,
                                 method_name=run.method.name)
    return party, _held(cls.default_kinds_for(d.phase) if kinds is None else kinds)  # None: the class's (its __init__)


def _held(kinds: Any) -> tuple | None:
    """Kinds as a defense holds them (``Protection.kinds``, a frozenset: their order and repeats are no part of it)."""
    return None if kinds is None else tuple(sorted(set(kinds)))


#: The attack block's settings the planner may resolve, in the order they are tried (the victim's default depends on
#: the adversary: unset first), each with what it resolves.
ATTACK_SETTINGS: dict[str, Resolve] = {"victim": _roles, "adversary": _roles, "prior_ssl": _prior_ssl}
#: Each defense's settings the planner may resolve (its kinds depend on its party: unset first).
DEFENSE_SETTINGS: dict[str, Resolve] = {"kinds": _bound, "party": _bound}
#: A setting's one order, tried where its default is another run (review var F4: iso's gradient+embedding and
#: embedding+gradient are one run, a defense holding its kinds as a set).
ORDERED: dict[str, Callable[[Any], Any]] = {"kinds": lambda kinds: sorted(set(kinds))}


def one_spelling(run: RunConfig) -> RunConfig:
    """``run`` with each setting the planner resolves the same at its default written at its default (the module's
    rule); the same run whichever way its records were written."""
    settings = [*((None, name, f) for name, f in ATTACK_SETTINGS.items()),
                *((i, name, f) for i in range(len(run.defenses)) for name, f in DEFENSE_SETTINGS.items())]
    for where, name, resolve in settings:
        section = run.attack if where is None else run.defenses[where]
        value = getattr(section, name)
        default = type(section).model_fields[name].get_default(call_default_factory=True)
        for spelling in (default, *([ORDERED[name](value)] if name in ORDERED and value is not None else [])):
            if value == spelling:
                break
            other = _with(run, where, section.model_copy(update={name: spelling}))
            try:
                same = resolve(other, where) == resolve(run, where)
            except VflprivError:
                same = False  # unresolvable as given or spelled so: as written
            if same:
                run = other
                break
    return run


def _with(run: RunConfig, where: int | None, section: Any) -> RunConfig:
    """``run`` with its attack block (``where`` None) or defense ``where`` replaced by ``section``."""
    if where is None:
        return run.model_copy(update={"attack": section})
    return run.model_copy(update={"defenses": [section if i == where else d for i, d in enumerate(run.defenses)]})


def disagreement(record: Any, run: RunConfig) -> str:
    """What a stored ``record`` says of its run that its own settings ``run`` do not (``runner.naming``: another run,
    an epsilon no defense of them claims, a feature epsilon at a victim none of them guards, an epsilon their
    accountants do not give, settings no run accepts or not its key's), or '': such a record is damaged (a hand edit),
    left out of every table and recomputed on resume (review hunt H5, H6, hunt3 P1; task epsread)."""
    return (misnamed(record, run) or unclaimable(record, run) or unguarded(record, run) or miscounted(record, run)
            or refused(record, run) or unkeyed(record, run))


def withheld(record: Any, run: RunConfig) -> str:
    """Why ``record``'s epsilons are read as none though it is not damaged (``runner.accountants.unjudged``: code
    not importable here, a plugin method's count; ``runner.naming.unverified``: settings not matched with their key),
    or '': where records are read, as :func:`disagreement`."""
    return unjudged(record, run) or unverified(record, run)


def resumed(record: Any, run: RunConfig) -> str:
    """:func:`disagreement`, and where a resume plans ``run``: an entry its plugin method voids
    (``accountants.unvoided``: review hunt3 P12), or '': such a stored record is recomputed, not resumed."""
    return disagreement(record, run) or unvoided(record, run)
