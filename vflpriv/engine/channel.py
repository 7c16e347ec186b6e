"""The one path between parties: defenses transform, the meter counts, the adversaries' inboxes record."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterable, Protocol

import torch

from vflpriv.common.errors import ChannelViolation
from vflpriv.engine.message import Message, Payload, detached, payload_bytes
from vflpriv.engine.roles import Traffic, receivers, role


class MessageTransform(Protocol):
    """A defense bound to the messages it protects (see ``vflpriv.defenses.base``)."""

    def protects(self, message: Message) -> bool: ...

    def __call__(self, payload: Payload, message: Message) -> Payload: ...


@dataclass
class Meter:
    """Bytes and message counts per (phase, direction, kind)."""

    bytes: dict[tuple[str, str, str], int] = field(default_factory=lambda: defaultdict(int))
    messages: dict[tuple[str, str, str], int] = field(default_factory=lambda: defaultdict(int))

    def count(self, message: Message, payload: Payload) -> None:
        key = (message.phase, message.direction, message.kind)
        self.bytes[key] += payload_bytes(payload)
        self.messages[key] += 1

    def total_bytes(self, phase: str | None = None) -> int:
        return sum(v for k, v in self.bytes.items() if phase is None or k[0] == phase)

    def total_messages(self, phase: str | None = None) -> int:
        return sum(v for k, v in self.messages.items() if phase is None or k[0] == phase)

    def rows(self, phase: str) -> list[list]:
        """The counts of ``phase`` as rows [phase, direction, kind, bytes, messages] (what a cached pretraining keeps)."""
        return [[*k, self.bytes[k], self.messages[k]] for k in self.messages if k[0] == phase]

    def add_rows(self, rows: list[list]) -> None:
        """Add counts given as :meth:`rows` (a cached pretraining's traffic, as if it had been sent again)."""
        for phase, direction, kind, size, count in rows:
            self.bytes[(phase, direction, kind)] += size
            self.messages[(phase, direction, kind)] += count


@dataclass(frozen=True, slots=True)
class Received:
    """One message as the adversary received it (after defenses)."""

    kind: str
    phase: str
    sender: int
    epoch: int
    sample_ids: torch.Tensor | None
    payload: Payload


@dataclass
class Inbox:
    """What one receiver (a party, or ``SERVER``) receives, kept only for the (kind, phase) pairs an attack run by
    that receiver asked for."""

    owner: int
    wanted: set[tuple[str, str]] = field(default_factory=set)
    received: list[Received] = field(default_factory=list)

    def record(self, message: Message, payload: Payload) -> None:
        if (message.kind, message.phase) in self.wanted:
            self.received.append(
                Received(message.kind, message.phase, message.sender, message.epoch, message.sample_ids, payload)
            )

    def select(self, kind: str, phase: str) -> list[Received]:
        return [r for r in self.received if r.kind == kind and r.phase == phase]


class Channel:
    """``send(message)`` returns the payload as the receiver gets it; nothing crosses parties otherwise.

    With ``declared`` (the method's traffic), a message outside it is refused, and so is one sent to a role that
    the star topology does not route it to (``vflpriv.engine.roles.receivers``): an attack or defense planned
    against the declaration would otherwise miss it. ``inbox`` records what the label adversary receives;
    ``taps`` are the inboxes of the other receivers some attack listens as (the active party, the server).
    """

    def __init__(
        self, transforms: Iterable[MessageTransform], inbox: Inbox, meter: Meter | None = None,
        *, declared: Traffic | None = None, taps: Iterable[Inbox] = (),
    ):
        self.transforms = list(transforms)
        self.inbox = inbox
        #: Every receiver's inbox by owner (the label adversary's is ``inbox``).
        self.inboxes: dict[int, Inbox] = {tap.owner: tap for tap in taps}
        if inbox.owner in self.inboxes:
            raise ValueError(f"two inboxes for receiver {inbox.owner}: give one with both wanted sets")
        self.inboxes[inbox.owner] = inbox
        self.meter = meter or Meter()
        self.declared = declared
        self._routes: dict[tuple[int, str, str, int], list[MessageTransform]] = {}
        self.observers: list[Callable[[Message, Payload], None]] = []
        self._muted = False

    @contextmanager
    def muted(self) -> Iterator[None]:
        """Messages sent inside are transformed (the receiver gets what it would get) but neither counted nor
        recorded nor observed: a measurement's traffic, not the protocol's."""
        self._muted, before = True, self._muted
        try:
            yield
        finally:
            self._muted = before

    def _route(self, message: Message) -> list[MessageTransform]:
        key = (message.sender, message.kind, message.phase, message.receiver)
        route = self._routes.get(key)
        if route is None:
            triple = (role(message.sender), message.kind, message.phase)
            if self.declared is not None and triple not in self.declared:
                raise ChannelViolation(
                    f"the method sent a {message.kind} message from the {triple[0]} party in {message.phase}, "
                    f"which it does not declare in its `sends` ({', '.join('/'.join(t) for t in sorted(self.declared))})"
                )
            to, allowed = role(message.receiver), receivers(triple[0], message.kind)
            if self.declared is not None and to not in allowed:
                raise ChannelViolation(
                    f"the method sent a {message.kind} message from the {triple[0]} party to the {to} in "
                    f"{message.phase}; such a message goes to the {' and the '.join(sorted(allowed))} (a party's "
                    "weights, head-weights and statistics to the server, anything else across the split), which is "
                    "where the planner looks for what each adversary receives")
            route = [t for t in self.transforms if t.protects(message)]
            self._routes[key] = route
        return route

    def send(self, message: Message) -> Payload:
        payload = detached(message.payload)
        for transform in self._route(message):
            payload = transform(payload, message)
        if self._muted:
            return payload
        self.meter.count(message, payload)
        inbox = self.inboxes.get(message.receiver)
        if inbox is not None:
            inbox.record(message, payload)
        for observe in self.observers:
            observe(message, payload)
        return payload
