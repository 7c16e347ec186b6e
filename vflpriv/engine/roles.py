"""Who sends a message, by role: what a method declares it sends, and what a passive party receives.

A method declares its traffic as (sender role, kind, phase) triples; roles are ``active`` (party 0,
the label holder), ``passive`` (parties 1..K-1) and ``server``. The channel refuses any message outside
the declaration, and the planner refuses a defense or an attack on messages the method never sends.
"""

from __future__ import annotations

from typing import Literal

from vflpriv.engine.message import ACTIVE, EMBEDDING, FINETUNE, GRADIENT, INFERENCE, SERVER

Role = Literal["active", "passive", "server"]
PASSIVE: Role = "passive"
Traffic = frozenset[tuple[str, str, str]]

#: Split learning's messages: embeddings up and gradients down in finetuning, embeddings up at inference.
SPLIT_LEARNING: Traffic = frozenset({
    ("passive", EMBEDDING, FINETUNE), ("active", GRADIENT, FINETUNE), ("passive", EMBEDDING, INFERENCE),
})


def role(party: int) -> Role:
    """The role of a party index (``SERVER`` is the server)."""
    return "server" if party == SERVER else "active" if party == ACTIVE else "passive"


def passive_receives(sends: Traffic) -> frozenset[tuple[str, str]]:
    """(kind, phase) pairs a passive party receives: what the active party and the server send (star topology)."""
    return frozenset((kind, phase) for who, kind, phase in sends if who in ("active", "server"))
