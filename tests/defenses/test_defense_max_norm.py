"""Max-norm (Li et al. 2022): every row's expected squared norm becomes the batch maximum."""

import torch

from vflpriv.config.parse import NoOptions
from vflpriv.defenses.max_norm import MaxNorm
from vflpriv.engine import FINETUNE, GRADIENT, Message


def _mean_sq_norms(defense, d, reps=20000):
    """Monte Carlo E||out_i||^2: the batch tiled ``reps`` times has the same maximum norm."""
    tiled = d.repeat(reps, 1)
    out = defense(tiled, Message(GRADIENT, FINETUNE, 0, 1, tiled))
    return out.pow(2).sum(1).reshape(reps, -1).mean(0)


def _max_norm(strength=1.0, seed=0):
    return MaxNorm(strength=strength, party=0, phase=FINETUNE, kinds=None, options=NoOptions(),
                   generator=torch.Generator().manual_seed(seed))


def test_expected_squared_norms_are_equalised():
    g = torch.Generator().manual_seed(0)
    d = torch.randn(6, 10, generator=g) * torch.tensor([0.1, 0.5, 1.0, 2.0, 3.0, 4.0])[:, None]
    sq = _mean_sq_norms(_max_norm(), d)
    target = d.pow(2).sum(1).max()
    assert torch.allclose(sq, target.expand_as(sq), rtol=0.04)


def test_noise_keeps_each_row_on_its_own_line_and_partial_strength_interpolates():
    d = torch.randn(5, 7, generator=torch.Generator().manual_seed(1))
    out = _max_norm()(d, Message(GRADIENT, FINETUNE, 0, 1, d))
    assert torch.allclose(torch.nn.functional.cosine_similarity(out, d).abs(), torch.ones(5), atol=1e-5)
    sq = _mean_sq_norms(_max_norm(strength=0.5), d)
    expected = 0.75 * d.pow(2).sum(1) + 0.25 * d.pow(2).sum(1).max()
    assert torch.allclose(sq, expected, rtol=0.04)
    assert _max_norm(strength=0.0)(d, Message(GRADIENT, FINETUNE, 0, 1, d)) is d
