"""ISO (FedHSSL Eq. 7): strength 0 is the identity and the noise std equals lambda * max ||d_i|| / sqrt(m)."""

import math

import pytest
import torch

from vflpriv.common.errors import ConfigError
from vflpriv.config.parse import NoOptions
from vflpriv.defenses.iso import IsotropicNoise, iso_sigma
from vflpriv.engine import EMBEDDING, FINETUNE, GRADIENT, PRETRAIN, WEIGHTS, Message


def _iso(strength, kinds=None, phase=FINETUNE, seed=0):
    return IsotropicNoise(strength=strength, party=0, phase=phase, kinds=kinds, options=NoOptions(),
                          generator=torch.Generator().manual_seed(seed))


def test_strength_zero_is_identity():
    d = torch.randn(8, 5)
    msg = Message(GRADIENT, FINETUNE, 0, 1, d)
    assert _iso(0.0)(d, msg) is d


@pytest.mark.parametrize("kind,shape", [(GRADIENT, (4000, 16)), (EMBEDDING, (2000, 32)), (WEIGHTS, (512, 128))])
def test_noise_std_matches_formula(kind, shape):
    g = torch.Generator().manual_seed(1)
    d = torch.randn(shape, generator=g) * torch.linspace(0.1, 3.0, shape[0]).unsqueeze(1)
    lam = 5.0
    defense = _iso(lam, kinds=[kind], phase=PRETRAIN if kind != GRADIENT else FINETUNE)
    out = defense(d, Message(kind, defense.phase, 0, 1, d))
    expected = lam * d.norm(dim=1).max() / math.sqrt(shape[1])
    noise = out - d
    assert noise.std().item() == pytest.approx(expected.item(), rel=0.02)
    assert noise.mean().abs().item() < 0.02 * expected.item()


def test_weights_dict_and_one_dimensional_rows():
    w = {"weight": torch.ones(4, 9), "bias": torch.full((16,), 2.0)}
    assert iso_sigma(w["weight"], strength=1.0).item() == pytest.approx(3.0 / 3.0)
    assert iso_sigma(w["bias"], strength=1.0).item() == pytest.approx(8.0 / 4.0)
    out = _iso(1.0, kinds=[WEIGHTS], phase=PRETRAIN)(w, Message(WEIGHTS, PRETRAIN, 0, -1, w))
    assert set(out) == {"weight", "bias"} and not torch.equal(out["bias"], w["bias"])


def test_seeded_and_routed():
    d = torch.randn(6, 4)
    msg = Message(GRADIENT, FINETUNE, 0, 1, d)
    assert torch.equal(_iso(2.0, seed=7)(d, msg), _iso(2.0, seed=7)(d, msg))
    defense = _iso(2.0)
    assert defense.protects(msg)
    assert not defense.protects(Message(GRADIENT, PRETRAIN, 0, 1, d))
    assert not defense.protects(Message(GRADIENT, FINETUNE, 1, 0, d))
    assert not defense.protects(Message(EMBEDDING, FINETUNE, 0, 1, d))


def test_unsupported_kind_is_refused():
    with pytest.raises(ConfigError, match="valid kinds"):
        _iso(1.0, kinds=["labels"])
