"""Every role may listen: the channel records what each receiver (a passive party, the active party, the server)
receives in its own inbox, and refuses a message routed where the star topology does not send it (the planner reads
what each role receives off the same topology)."""

from __future__ import annotations

import pytest
import torch

from vflpriv.common.errors import ProtocolError
from vflpriv.engine import (
    ACTIVE,
    EMBEDDING,
    FINETUNE,
    GRADIENT,
    PRETRAIN,
    SERVER,
    SPLIT_LEARNING,
    WEIGHTS,
    Channel,
    Inbox,
    Message,
)
from vflpriv.engine.roles import passive_receives, received

FEDHSSL_LIKE = SPLIT_LEARNING | {("passive", WEIGHTS, PRETRAIN), ("server", WEIGHTS, PRETRAIN),
                                 ("active", EMBEDDING, PRETRAIN)}


def _channel():
    taps = [Inbox(owner=ACTIVE, wanted={(EMBEDDING, FINETUNE)}), Inbox(owner=SERVER, wanted={(WEIGHTS, PRETRAIN)})]
    return Channel([], Inbox(owner=1, wanted={(GRADIENT, FINETUNE)}), declared=FEDHSSL_LIKE, taps=taps)


def test_each_receiver_s_inbox_holds_what_it_received_and_nothing_else():
    channel = _channel()
    h, g, w = torch.ones(2, 3), torch.full((2, 3), 2.0), {"top.weight": torch.zeros(1)}
    ids = torch.tensor([4, 7])
    channel.send(Message(EMBEDDING, FINETUNE, 1, ACTIVE, h, ids))
    channel.send(Message(GRADIENT, FINETUNE, ACTIVE, 1, g, ids))
    channel.send(Message(WEIGHTS, PRETRAIN, 1, SERVER, w))
    channel.send(Message(WEIGHTS, PRETRAIN, SERVER, 1, w))  # the passive party's inbox does not keep weights
    active, server, passive = channel.inboxes[ACTIVE], channel.inboxes[SERVER], channel.inbox
    assert [(r.kind, r.sender) for r in active.received] == [(EMBEDDING, 1)]
    assert torch.equal(active.received[0].payload, h) and torch.equal(active.received[0].sample_ids, ids)
    assert [(r.kind, r.sender) for r in server.received] == [(WEIGHTS, 1)]
    assert [(r.kind, r.sender) for r in passive.received] == [(GRADIENT, ACTIVE)]


@pytest.mark.parametrize(("message", "where"), [
    (Message(EMBEDDING, FINETUNE, 1, SERVER, torch.ones(1)), "to the server"),  # a party's embedding crosses the split
    (Message(WEIGHTS, PRETRAIN, 1, ACTIVE, {"w": torch.ones(1)}), "to the active"),  # weights go to the server
])
def test_a_message_routed_off_the_topology_is_refused(message, where):
    with pytest.raises(ProtocolError, match=where):
        _channel().send(message)


def test_what_each_role_receives_is_read_off_the_declared_traffic():
    assert received(FEDHSSL_LIKE, "active", sender="passive") == {(EMBEDDING, FINETUNE), ("embedding", "inference")}
    assert received(FEDHSSL_LIKE, "server") == {(WEIGHTS, PRETRAIN)}
    assert received(FEDHSSL_LIKE, "passive", sender="active") == {(GRADIENT, FINETUNE), (EMBEDDING, PRETRAIN)}
    assert passive_receives(FEDHSSL_LIKE) == {(GRADIENT, FINETUNE), (EMBEDDING, PRETRAIN), (WEIGHTS, PRETRAIN)}
