"""The channel is the only path between parties, and the meter counts exactly what crossed."""

import math

import torch

from vflpriv.common.seeding import generator
from vflpriv.config.schema import RunConfig
from vflpriv.data.load import load_dataset
from vflpriv.data.scenario import build_scenario
from vflpriv.engine import (
    EMBEDDING,
    FINETUNE,
    GRADIENT,
    INFERENCE,
    Channel,
    Federation,
    Inbox,
    Message,
    make_parties,
)
from vflpriv.methods.finetune import finetune, new_top, predict
from vflpriv.models.encoders import build_encoder


class Zeroing:
    """A transform that replaces every message of one kind by zeros (a wire that carries nothing)."""

    def __init__(self, kind):
        self.kind = kind

    def protects(self, message):
        return message.kind == self.kind

    def __call__(self, payload, message):
        return torch.zeros_like(payload)


def _federation(cfg: RunConfig, transforms=()):
    ds = load_dataset(cfg.dataset, parties=cfg.partition.parties)
    sc = build_scenario(ds, cfg.partition, seed=cfg.seed)
    dev = torch.device("cpu")
    channel = Channel(transforms, Inbox(owner=sc.adversary, wanted={(GRADIENT, FINETUNE)}))
    fed = Federation(make_parties(sc, dev), sc.aligned, channel, ds.num_classes, cfg.model, cfg.finetune,
                     generator(cfg.seed, "method"), dev)
    bottoms = [build_encoder(p.spec, fed.model, generator=fed.generator) for p in fed.parties]
    return fed, bottoms, new_top(fed, bottoms)


def test_one_epoch_message_count_and_bytes(tiny):
    cfg = tiny(finetune={"epochs": 1, "batch_size": 32}, partition={"parties": 4, "labeled": 100, "aux": 40})
    fed, bottoms, top = _federation(cfg)
    finetune(fed, bottoms, top)
    batches = math.ceil(100 / 32)  # the trailing 4-sample batch stays a batch of its own
    passive = 3
    m = fed.channel.meter
    assert m.messages[(FINETUNE, "up", EMBEDDING)] == batches * passive
    assert m.messages[(FINETUNE, "down", GRADIENT)] == batches * passive
    assert m.bytes[(FINETUNE, "up", EMBEDDING)] == 100 * cfg.model.out_dim * 4 * passive
    assert m.bytes[(FINETUNE, "down", GRADIENT)] == 100 * cfg.model.out_dim * 4 * passive
    assert m.total_messages() == 2 * batches * passive
    received = fed.channel.inbox.select(GRADIENT, FINETUNE)
    assert len(received) == batches and all(r.sender == 0 for r in received)
    assert torch.equal(torch.cat([r.sample_ids for r in received]).sort().values, fed.active.label_ids)


def test_passive_learns_only_from_gradients_sent_through_the_channel(tiny):
    cfg = tiny(finetune={"epochs": 1, "weight_decay": 0.0})
    fed, bottoms, top = _federation(cfg, [Zeroing(GRADIENT)])
    passive_before = [p.clone() for p in bottoms[1].parameters()]
    active_before = [p.clone() for p in bottoms[0].parameters()]
    finetune(fed, bottoms, top)
    # zero gradients in, no update out: Adam's step is exactly 0 when every gradient was 0
    assert all(torch.equal(a, b) for a, b in zip(passive_before, bottoms[1].parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(active_before, bottoms[0].parameters()))


def test_active_sees_passive_features_only_through_the_channel(tiny):
    cfg = tiny(finetune={"epochs": 1})
    fed, bottoms, top = _federation(cfg, [Zeroing(EMBEDDING)])
    finetune(fed, bottoms, top)
    from vflpriv.methods.finetune import Trained

    trained = Trained(bottoms, top)
    logits = predict(fed, trained)
    passive = fed.parties[1]
    scrambled = passive.x_test[torch.randperm(passive.x_test.shape[0], generator=torch.Generator().manual_seed(0))]
    object.__setattr__(passive, "x_test", scrambled)
    assert torch.equal(logits, predict(fed, trained))
    assert fed.channel.meter.messages[(INFERENCE, "up", EMBEDDING)] == 2


def test_payload_is_detached_from_the_sender_graph():
    channel = Channel([], Inbox(owner=1))
    x = torch.ones(3, 2, requires_grad=True)
    out = channel.send(Message(EMBEDDING, FINETUNE, 1, 0, x * 2))
    assert not out.requires_grad and out.grad_fn is None


def test_transforms_route_by_sender_kind_and_phase():
    channel = Channel([Zeroing(GRADIENT)], Inbox(owner=1, wanted={(GRADIENT, FINETUNE)}))
    g = torch.ones(2, 3)
    assert torch.equal(channel.send(Message(EMBEDDING, FINETUNE, 1, 0, g)), g)
    assert torch.equal(channel.send(Message(GRADIENT, FINETUNE, 0, 1, g)), torch.zeros(2, 3))
    # the adversary's inbox holds what it received (after the defense), not what was sent
    assert torch.equal(channel.inbox.received[0].payload, torch.zeros(2, 3))
    channel.send(Message(GRADIENT, FINETUNE, 0, 2, g))
    assert len(channel.inbox.received) == 1


class _Affine:
    """A gradient transform x -> a x + b, to tell the order of a chain from its result."""

    def __init__(self, a, b):
        self.a, self.b = a, b

    def protects(self, message):
        return message.kind == GRADIENT

    def __call__(self, payload, message):
        return self.a * payload + self.b


def test_several_defenses_on_one_message_all_act_in_their_order():
    channel = Channel([_Affine(2.0, 1.0), _Affine(3.0, 0.0), Zeroing(EMBEDDING)], Inbox(owner=1, wanted=set()))
    g = torch.ones(2, 3)
    assert torch.equal(channel.send(Message(GRADIENT, FINETUNE, 0, 1, g)), torch.full((2, 3), 9.0))  # 3 (2 g + 1)
    swapped = Channel([_Affine(3.0, 0.0), _Affine(2.0, 1.0)], Inbox(owner=1, wanted=set()))
    assert torch.equal(swapped.send(Message(GRADIENT, FINETUNE, 0, 1, g)), torch.full((2, 3), 7.0))  # 2 (3 g) + 1


def test_the_meter_counts_per_phase_and_its_rows_add_back_to_the_same_totals():
    from vflpriv.engine import PRETRAIN
    from vflpriv.engine.channel import Meter

    channel = Channel([], Inbox(owner=1))
    for phase, kind, rows in ((PRETRAIN, EMBEDDING, 4), (PRETRAIN, EMBEDDING, 2), (FINETUNE, GRADIENT, 3),
                              (INFERENCE, EMBEDDING, 5)):
        channel.send(Message(kind, phase, 0 if kind == GRADIENT else 1, 1 if kind == GRADIENT else 0,
                             torch.ones(rows, 8)))
    meter = channel.meter
    assert (meter.total_bytes(PRETRAIN), meter.total_messages(PRETRAIN)) == (6 * 8 * 4, 2)
    assert (meter.total_bytes(FINETUNE), meter.total_messages(FINETUNE)) == (3 * 8 * 4, 1)
    assert (meter.total_bytes(), meter.total_messages()) == (14 * 8 * 4, 4)
    rows = meter.rows(PRETRAIN)
    assert rows == [[PRETRAIN, "up", EMBEDDING, 6 * 8 * 4, 2]]
    again = Meter()
    again.add_rows(rows)
    again.add_rows(rows)
    assert (again.total_bytes(PRETRAIN), again.total_messages(PRETRAIN), again.total_messages(FINETUNE)) == (
        2 * 6 * 8 * 4, 4, 0)


def test_the_inbox_selects_one_kind_of_one_phase():
    from vflpriv.engine import PRETRAIN

    channel = Channel([], Inbox(owner=1, wanted={(GRADIENT, FINETUNE), (EMBEDDING, PRETRAIN), (EMBEDDING, FINETUNE)}))
    for kind, phase in ((GRADIENT, FINETUNE), (EMBEDDING, PRETRAIN), (EMBEDDING, FINETUNE)):
        channel.send(Message(kind, phase, 0, 1, torch.ones(2, 2)))
    assert [(r.kind, r.phase) for r in channel.inbox.select(GRADIENT, FINETUNE)] == [(GRADIENT, FINETUNE)]
    assert [(r.kind, r.phase) for r in channel.inbox.select(EMBEDDING, PRETRAIN)] == [(EMBEDDING, PRETRAIN)]


def test_muted_traffic_is_transformed_but_never_counted_recorded_or_observed_and_muting_nests():
    channel = Channel([Zeroing(GRADIENT)], Inbox(owner=1, wanted={(GRADIENT, FINETUNE)}))
    seen = []
    channel.observers.append(lambda m, p: seen.append(m.kind))
    with channel.muted():
        with channel.muted():
            pass
        out = channel.send(Message(GRADIENT, FINETUNE, 0, 1, torch.ones(2, 2)))  # still muted after the inner one
    assert torch.equal(out, torch.zeros(2, 2))
    assert channel.meter.total_messages() == 0 and not channel.inbox.received and not seen
    channel.send(Message(GRADIENT, FINETUNE, 0, 1, torch.ones(2, 2)))
    assert channel.meter.total_messages() == 1 and len(channel.inbox.received) == 1 and seen == [GRADIENT]


def test_an_undeclared_message_is_refused_naming_its_sender_s_role():
    import pytest

    from vflpriv.common.errors import ProtocolError

    channel = Channel([], Inbox(owner=1), declared={("active", GRADIENT, FINETUNE)})
    channel.send(Message(GRADIENT, FINETUNE, 0, 1, torch.ones(1)))
    with pytest.raises(ProtocolError, match="a embedding message from the passive party in finetune, which it does "
                                            "not declare in its `sends` \\(active/gradient/finetune\\)"):
        channel.send(Message(EMBEDDING, FINETUNE, 1, 0, torch.ones(1)))
