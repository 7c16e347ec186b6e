"""Who sends a message, by role, and who receives it: what a method declares it sends, and what each role receives.

A method declares its traffic as (sender role, kind, phase) triples; roles are ``active`` (party 0,
the label holder), ``passive`` (parties 1..K-1) and ``server``. The channel refuses any message outside
the declaration, and the planner refuses a defense or an attack on messages the method never sends.

Receivers follow one star topology (:func:`receivers`): a party's aggregated kinds (``weights``, ``head-weights``,
``statistics``) go to the server, every other kind a party sends crosses the split (a passive party's to the active
party, the active party's to the passive parties), and the server sends to the parties. The channel refuses a
message routed otherwise, so what the planner derives for a role (:func:`received`) is what that role's inbox can
hold: an attack run by that role (a passive party, the active party, the server) sees exactly that.
"""

from __future__ import annotations

from typing import Literal

from vflpriv.engine.message import (
    ACTIVE,
    EMBEDDING,
    FINETUNE,
    GRADIENT,
    HEAD_WEIGHTS,
    INFERENCE,
    SERVER,
    STATISTICS,
    WEIGHTS,
)

Role = Literal["active", "passive", "server"]
PASSIVE: Role = "passive"
ROLES: tuple[Role, ...] = ("active", "passive", "server")
Traffic = frozenset[tuple[str, str, str]]

#: Split learning's messages: embeddings up and gradients down in finetuning, embeddings up at inference.
SPLIT_LEARNING: Traffic = frozenset({
    ("passive", EMBEDDING, FINETUNE), ("active", GRADIENT, FINETUNE), ("passive", EMBEDDING, INFERENCE),
})

#: Kinds a party sends to the server to be aggregated (FedHSSL's partial model aggregation), not to another party.
AGGREGATED = frozenset({WEIGHTS, HEAD_WEIGHTS, STATISTICS})


def role(party: int) -> Role:
    """The role of a party index (``SERVER`` is the server)."""
    return "server" if party == SERVER else "active" if party == ACTIVE else "passive"


def receivers(sender: Role, kind: str) -> frozenset[Role]:
    """The roles a ``kind`` message from ``sender`` may go to (the star topology of the module's docstring)."""
    if sender == "server":
        return frozenset({"active", "passive"})
    if kind in AGGREGATED:
        return frozenset({"server"})
    return frozenset({"passive" if sender == "active" else "active"})


def received(sends: Traffic, receiver: Role, *, sender: Role | None = None) -> frozenset[tuple[str, str]]:
    """(kind, phase) pairs role ``receiver`` receives under ``sends`` (from ``sender`` only, if given)."""
    return frozenset((kind, phase) for who, kind, phase in sends
                     if receiver in receivers(who, kind) and sender in (None, who))


def passive_receives(sends: Traffic) -> frozenset[tuple[str, str]]:
    """(kind, phase) pairs a passive party receives: what the active party and the server send (star topology)."""
    return received(sends, PASSIVE)
