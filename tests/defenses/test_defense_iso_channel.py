"""ISO through the channel (FedHSSL Eq. 7): per message kind the injected noise has std
lambda * max_i ||d_i|| / sqrt(m), each defense with its own phase, kinds, party and strength."""

import math

import pytest
import torch

from vflpriv.config.parse import NoOptions
from vflpriv.defenses.iso import IsotropicNoise
from vflpriv.engine import ACTIVE, EMBEDDING, FINETUNE, GRADIENT, PRETRAIN, SERVER, WEIGHTS, Channel, Inbox, Message


def _iso(strength, *, phase, kinds, party=ACTIVE, seed=0):
    return IsotropicNoise(strength=strength, party=party, phase=phase, kinds=kinds, options=NoOptions(),
                          generator=torch.Generator().manual_seed(seed))


def _expected(d: torch.Tensor, lam: float) -> float:
    rows = d.reshape(1, -1) if d.dim() <= 1 else d.reshape(d.shape[0], -1)
    return lam * rows.norm(dim=1).max().item() / math.sqrt(rows.shape[1])


def test_two_iso_defenses_each_apply_their_own_formula_per_kind():
    lam_p, lam_f = 2.0, 7.0
    channel = Channel([_iso(lam_p, phase=PRETRAIN, kinds=[EMBEDDING, WEIGHTS], seed=1),
                       _iso(lam_f, phase=FINETUNE, kinds=[GRADIENT], seed=2)], Inbox(owner=1))
    g = torch.Generator().manual_seed(0)
    scale = torch.linspace(0.1, 2.0, 3000)[:, None]
    cases = [
        (Message(EMBEDDING, PRETRAIN, ACTIVE, 1, torch.randn(3000, 24, generator=g) * scale), lam_p),
        (Message(GRADIENT, FINETUNE, ACTIVE, 1, torch.randn(3000, 24, generator=g) * scale), lam_f),
        (Message(WEIGHTS, PRETRAIN, ACTIVE, SERVER, torch.randn(600, 100, generator=g)), lam_p),
        (Message(WEIGHTS, PRETRAIN, ACTIVE, SERVER, torch.randn(40000, generator=g)), lam_p),  # 1-D: one row
    ]
    for message, lam in cases:
        noise = channel.send(message) - message.payload
        assert noise.std().item() == pytest.approx(_expected(message.payload, lam), rel=0.03), message.kind


def test_unprotected_traffic_passes_unchanged():
    channel = Channel([_iso(5.0, phase=FINETUNE, kinds=[GRADIENT])], Inbox(owner=1))
    d = torch.randn(8, 4)
    for message in (Message(GRADIENT, PRETRAIN, ACTIVE, 1, d),      # other phase
                    Message(EMBEDDING, FINETUNE, ACTIVE, 1, d),     # other kind
                    Message(GRADIENT, FINETUNE, 1, ACTIVE, d)):     # other sender
        assert torch.equal(channel.send(message), d)
