"""Who runs an attack against whom, resolved while planning: the adversary (a party or the server), its role, the
victim of a feature attack, and the messages its inbox must keep.

A label attack is run by ``partition.adversary``, the passive party holding the auxiliary labels. A feature attack
names its adversary (``attack.adversary``; default the active party) and its victim (``attack.victim``; default
party 1 when the adversary is the active party or the server, the active party when a passive party attacks).
The attack declares the roles that may run it; the planner refuses any other, an adversary that is its own victim,
and a role that receives nothing the attack reads (derived from the method's traffic by
:func:`vflpriv.engine.roles.received`, so the view holds what the role really receives, nothing else).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vflpriv.common.errors import ConfigError, IncompatibleError, UnfitOptionsError
from vflpriv.config.registry import ATTACKS
from vflpriv.config.schema import RunConfig
from vflpriv.engine import ACTIVE, INFERENCE, SERVER
from vflpriv.engine.roles import Role, received, role


@dataclass(frozen=True)
class Adversary:
    """The attack's adversary (a party index or ``SERVER``), its victim (feature attacks), and what its inbox keeps:
    ``reads``, the (kind, phase) pairs the attack reads from it."""

    party: int
    victim: int | None = None
    reads: tuple[tuple[str, str], ...] = ()

    @property
    def role(self) -> Role:
        return role(self.party)


def describe(party: int) -> str:
    """A party (or the server) in words, for messages."""
    if party == SERVER:
        return "the server"
    return f"party {party} (the {role(party)} party)"


def resolve(run: RunConfig, attack: Any, *, parties: int) -> Adversary:
    """The adversary of ``attack`` in ``run`` (and its victim), refused where the attack's roles exclude it or it
    names no party of the ``parties``."""
    party, victim = parties_of(run, attack.secret, parties=parties)
    if role(party) not in attack.roles:
        raise IncompatibleError(f"attack '{run.attack.name}' infers {attack.secret} and may be run by "
                                f"{' or '.join(_roles(attack.roles))}; its adversary here is {describe(party)}")
    return Adversary(party, victim)


def parties_of(run: RunConfig, secret: str, *, parties: int) -> tuple[int, int | None]:
    """(adversary, victim) of an attack on ``secret`` in ``run``: the defaults of the module's docstring, refused
    where they name no party of the ``parties`` or the adversary is its own victim."""
    cfg, name = run.attack, run.attack.name
    if secret == "labels":
        if cfg.adversary is not None and cfg.adversary != run.partition.adversary:
            raise ConfigError(f"attack.adversary={cfg.adversary}: label attack '{name}' is run by partition.adversary "
                              f"(party {run.partition.adversary}), the passive party that holds the auxiliary labels; "
                              "set partition.adversary instead")
        if cfg.victim is not None:
            raise ConfigError(f"attack.victim names whose features a feature attack infers; '{name}' infers the "
                              "active party's labels: remove attack.victim")
        return run.partition.adversary, None
    party = ACTIVE if cfg.adversary is None else SERVER if cfg.adversary == "server" else cfg.adversary
    if party != SERVER and party >= parties:
        raise ConfigError(f"attack.adversary={party}: there are {parties} parties (0..{parties - 1}) and the "
                          "server ('server')")
    victim = cfg.victim if cfg.victim is not None else 1 if party in (ACTIVE, SERVER) else ACTIVE
    if victim >= parties:
        raise ConfigError(f"attack.victim={victim}: there are {parties} parties (0..{parties - 1})")
    if victim == party:
        raise IncompatibleError(f"attack '{name}': the adversary, {describe(party)}, is its own victim (it holds "
                                "its features already); name another attack.victim or attack.adversary")
    return party, victim


def _roles(roles: frozenset[str]) -> list[str]:
    words = {"active": "the active party", "passive": "a passive party", "server": "the server"}
    return [words[r] for r in ("active", "passive", "server") if r in roles]


def _unfit(attack: Any, run: RunConfig, fits: Any) -> str:
    """Why the attack's options (or, tuned, a candidate of its search) do not ``fit`` a party's data; '' if they do."""
    cfg = run.attack
    return attack.search_problem(cfg.search_space, fits, name=cfg.name) if cfg.tune else fits(attack)


def label_reads(attack: Any, run: RunConfig, method: Any, adversary: Adversary, dataset: Any) -> Adversary:
    """A label attack's adversary with the messages it reads, each of which the method must send to its role."""
    got, phase = received(method.sends, adversary.role), run.attack.phase
    if isinstance(party := adversary.party, int) and party >= 0:  # the server holds no features
        fits = lambda a: a.own_problem(dataset.specs[party])  # noqa: E731
        problem = _unfit(attack, run, fits)
        if problem:
            raise UnfitOptionsError(f"attack '{run.attack.name}' run by {describe(party)}: {problem}")
    for kind, at in attack.required_messages(phase):
        if (kind, at) not in got:
            raise IncompatibleError(f"attack '{run.attack.name}' needs the {kind} messages of the {at} phase; "
                                    f"method '{run.method.name}' sends the adversary none")
    return Adversary(adversary.party, None, (*attack.needs_messages, *attack.required_messages(phase)))


def feature_reads(attack: Any, run: RunConfig, method: Any, adversary: Adversary, dataset: Any) -> Adversary:
    """A feature attack's adversary with the per-sample messages it reads from its victim: the first kind of the
    attack's ``observes`` that the victim's role sends the adversary's role in ``phase`` (and at inference, where the
    method sends it then: the test targets, of the finetuned model, so for a finetuning attack only). Refused where
    there is none (nothing feature-bearing reaches it), or where its options do not fit the victim's features."""
    victim, phase = adversary.victim, run.attack.phase
    assert victim is not None
    fits = lambda a: a.victim_problem(dataset.specs[victim])  # noqa: E731
    problem = _unfit(attack, run, fits)
    if problem:
        raise UnfitOptionsError(f"attack '{run.attack.name}' against {describe(victim)}: {problem}")
    got = received(method.sends, adversary.role, sender=role(victim))
    kinds = [k for k in attack.observes if (k, phase) in got]
    if not kinds:
        there = sorted(f"{k} ({p})" for k, p in received(method.sends, adversary.role))
        raise IncompatibleError(
            f"attack '{run.attack.name}' reconstructs {describe(victim)}'s features from the "
            f"{' or '.join(attack.observes)} messages it sends about each sample in {phase}; in method '{run.method.name}' "
            f"{describe(adversary.party)} receives none from it then (it receives: {', '.join(there) or 'nothing'})")
    at_inference = phase == "finetune" and (kinds[0], INFERENCE) in got  # the model the test rows come from
    reads = [(kinds[0], phase)] + ([(kinds[0], INFERENCE)] if at_inference else [])
    return Adversary(adversary.party, victim, tuple(reads))


#: How the planner derives each secret's reads (an attack's ``secret`` picks one).
READS = {"labels": label_reads, "features": feature_reads}
