"""MixMatch completion: sharpening and the K-view label guess behave as documented."""

import math

import pytest
import torch
from torch import nn

from vflpriv.attacks.base import AdversaryView
from vflpriv.attacks.labels.mixmatch import MixMatchCompletion, MixMatchOptions, beta_draw, ema_decay, sharpen
from vflpriv.data.base import PartySpec
from vflpriv.engine import FINETUNE, Inbox
from vflpriv.models.encoders import init_parameters


def _tabular_view(*, seed: int = 0, n: int = 120, dim: int = 6) -> AdversaryView:
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 2
    x = torch.randn(n, dim, generator=g) + (2 * y[:, None] - 1)
    aux = torch.arange(20)
    encoder = init_parameters(nn.Sequential(nn.Linear(dim, 8), nn.ReLU()), generator=g)
    return AdversaryView(
        party=1, phase=FINETUNE, num_classes=2, spec=PartySpec("tabular", (dim,)), encoder=encoder,
        local_x=x, aux_x=x[aux], aux_y=y[aux], aux_ids=aux, targets={"test": x}, target_ids={},
        inbox=Inbox(owner=1, wanted=set()), generator=torch.Generator().manual_seed(seed), device=torch.device("cpu"),
    )


def _guess(**options) -> torch.Tensor:
    attack = MixMatchCompletion(MixMatchOptions(epochs=2, iterations=10, batch_size=16, **options))
    return attack.infer(_tabular_view())["test"].scores


@pytest.mark.parametrize("temperature", [0.5, 0.8])
def test_sharpen_keeps_the_argmax_and_lowers_entropy(temperature):
    p = torch.softmax(torch.randn(50, 4, generator=torch.Generator().manual_seed(0)), 1)
    q = sharpen(p, temperature=temperature)
    entropy = lambda r: -(r * r.log()).sum(1)  # noqa: E731
    assert torch.allclose(q.sum(1), torch.ones(50))
    assert torch.equal(q.argmax(1), p.argmax(1))
    assert (entropy(q) < entropy(p)).all()
    assert torch.allclose(sharpen(p, temperature=1.0), p)


def test_a_small_temperature_sharpens_to_the_argmax_without_nan():
    """T = 0.01 over 10 classes: p^(1/T) underflowed to 0 in every class, and the 0 / 0 guesses diverged the run."""
    p = torch.softmax(torch.randn(50, 10, generator=torch.Generator().manual_seed(0)), 1)
    q = sharpen(p, temperature=0.01)
    assert torch.isfinite(q).all() and torch.allclose(q.sum(1), torch.ones(50))
    assert torch.equal(q.argmax(1), p.argmax(1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_the_smallest_temperature_allowed_sharpens_without_nan(dtype):
    """Review lo5 F7: T = 1e-39 gave NaN in 48 of 50 rows; the options refuse T below MIN_TEMPERATURE, where it is
    finite in float16 too."""
    p = torch.softmax(torch.randn(50, 10, generator=torch.Generator().manual_seed(0)), 1)
    q = sharpen(p.to(dtype), temperature=MixMatchOptions.model_fields["temperature"].metadata[0].ge)
    assert torch.isfinite(q).all() and torch.equal(q.argmax(1), p.to(dtype).argmax(1))


def test_beta_draws_are_seeded_and_in_range():
    draws = [beta_draw(alpha=0.75, generator=torch.Generator().manual_seed(s)) for s in range(200)]
    assert all(0.0 <= d <= 1.0 for d in draws)
    assert draws[:5] == [beta_draw(alpha=0.75, generator=torch.Generator().manual_seed(s)) for s in range(5)]
    assert abs(sum(draws) / len(draws) - 0.5) < 0.06  # Beta(a, a) is symmetric about 1/2


def test_unaugmented_tabular_party_guesses_from_one_view():
    """Without augmentation every view is the same sample, so K must not change anything."""
    assert torch.equal(_guess(views=1), _guess(views=4))
    assert not torch.equal(_guess(views=2, augment_rate=0.2), _guess(views=2))


def test_weight_decay_is_applied():
    assert not torch.equal(_guess(weight_decay=0.0), _guess(weight_decay=50.0))


def test_ema_warmup_caps_the_decay_early_and_leaves_it_later():
    assert ema_decay(0, ema=0.999, warmup=True) == pytest.approx(0.1)  # (1 + 0) / (10 + 0)
    assert ema_decay(90, ema=0.999, warmup=True) == pytest.approx(91 / 100)
    assert ema_decay(20000, ema=0.999, warmup=True) == 0.999  # past t = 8991 the cap is above the decay
    assert ema_decay(0, ema=0.999, warmup=False) == 0.999
    # what the warm-up is for: after the audit's 250 steps, the share of the random init left in the EMA
    left = {w: math.prod(ema_decay(t, ema=0.999, warmup=w) for t in range(250)) for w in (False, True)}
    assert left[False] > 0.7 and left[True] < 1e-3


def test_flat_buffer_updates_equal_the_tensor_by_tensor_ones(monkeypatch):
    """The weights' decay and the EMA run as one kernel each on flat buffers: the guesses are bit for bit those of
    the per-tensor loops (the fallback), BN statistics and all."""
    import vflpriv.attacks.labels.mixmatch as mixmatch

    def guesses() -> tuple[torch.Tensor, torch.Tensor]:
        out = MixMatchCompletion(MixMatchOptions(epochs=2, iterations=10, batch_size=16, ema_warmup=True,
                                                 weight_decay=5.0)).infer(_tabular_view())["test"]
        return out.predictions, out.confidence

    flat = guesses()
    monkeypatch.setattr(mixmatch, "flat_ema", lambda online, target: None)
    per_tensor = guesses()
    assert torch.equal(flat[0], per_tensor[0]) and torch.equal(flat[1], per_tensor[1])
