"""One spelling of a run, by which the tables name, group and count its records: the rule is that a setting the planner
may resolve for itself (:data:`ATTACK_SETTINGS`, :data:`DEFENSE_SETTINGS`: unset, auto) is written at its default
wherever the planner resolves the run the same with it there.

That covers a default given (``attack.prior_ssl=own`` where auto resolves to own, ``defenses.0.party=0`` where unset
binds the active party, an audit's feature roles) and a setting the run does not read (``attack.prior_ssl`` beside the
aux prior). Where the current code cannot resolve a setting (a plugin not installed here), it stays as written. Keys and
stored records are untouched: two spellings of one run keep their own keys, so a store resumes as it did.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vflpriv.common.errors import ConfigError, VflprivError
from vflpriv.common.secret_kinds import LABELS
from vflpriv.config.registry import ATTACKS, DEFENSES, METHODS
from vflpriv.config.schema import RunConfig
from vflpriv.runner.adversaries import parties_of
from vflpriv.runner.defense_planning import DEFENSE_POINTS, PASSIVE, PASSIVE_POINTS, message_kinds  # as it binds
from vflpriv.runner.accountants import miscounted
from vflpriv.runner.naming import misnamed, unclaimable, unguarded
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


def _bound(run: RunConfig, index: int) -> tuple:
    """The (party, kinds) defense ``index`` is built with, as ``defense_planning._defense`` binds it: at a passive
    party's points (unset: every passive party), inside the active party's training (unset: party 0, the class's
    default kinds), or on messages (``message_kinds``)."""
    d = run.defenses[index]
    cls = DEFENSES.get(d.name)
    if cls.hook_points & PASSIVE_POINTS:
        return PASSIVE if d.party is None else d.party, d.kinds
    if cls.hook_points & DEFENSE_POINTS:
        kinds = (d.kinds or list(cls.default_kinds)) if cls.supported_kinds else d.kinds
        return 0 if d.party is None else d.party, kinds
    method = METHODS.get(run.method.name)
    if not isinstance(getattr(method, "sends", None), (set, frozenset)):
        raise ConfigError(f"method '{run.method.name}' sets what it sends per instance: unknown here")
    return message_kinds(cls, method, party=d.party, phase=d.phase, kinds=d.kinds, name=d.name,
                         method_name=run.method.name)


#: The attack block's settings the planner may resolve, in the order they are tried (the victim's default depends on
#: the adversary: unset first), each with what it resolves.
ATTACK_SETTINGS: dict[str, Resolve] = {"victim": _roles, "adversary": _roles, "prior_ssl": _prior_ssl}
#: Each defense's settings the planner may resolve (its kinds depend on its party: unset first).
DEFENSE_SETTINGS: dict[str, Resolve] = {"kinds": _bound, "party": _bound}


def one_spelling(run: RunConfig) -> RunConfig:
    """``run`` with each setting the planner resolves the same at its default written at its default (the module's
    rule); the same run whichever way its records were written."""
    settings = [*((None, name, f) for name, f in ATTACK_SETTINGS.items()),
                *((i, name, f) for i in range(len(run.defenses)) for name, f in DEFENSE_SETTINGS.items())]
    for where, name, resolve in settings:
        section = run.attack if where is None else run.defenses[where]
        default = type(section).model_fields[name].get_default(call_default_factory=True)
        if getattr(section, name) == default:
            continue
        other = _with(run, where, section.model_copy(update={name: default}))
        try:
            same = resolve(other, where) == resolve(run, where)
        except VflprivError:
            same = False  # unresolvable as given or at the default: as written
        run = other if same else run
    return run


def _with(run: RunConfig, where: int | None, section: Any) -> RunConfig:
    """``run`` with its attack block (``where`` None) or defense ``where`` replaced by ``section``."""
    if where is None:
        return run.model_copy(update={"attack": section})
    return run.model_copy(update={"defenses": [section if i == where else d for i, d in enumerate(run.defenses)]})


def disagreement(record: Any, run: RunConfig) -> str:
    """What a stored ``record`` says of its run that its own settings ``run`` do not (``runner.naming``: another run,
    an epsilon no defense of them claims, a feature epsilon at a victim none of them guards, an epsilon their
    accountants do not give), or '': such a record is damaged (a hand edit), left out of every table and recomputed on
    resume (review hunt H5, H6; task epsread)."""
    return misnamed(record, run) or unclaimable(record, run) or unguarded(record, run) or miscounted(record, run)
