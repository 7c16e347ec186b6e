"""Properties of the SSL losses (FedHSSL Eq. 2-4, VFLHLP Eq. 6)."""

import math
from functools import partial

import pytest
import torch
import torch.nn.functional as F

from vflpriv.models.ssl import byol_loss, info_nce, negative_cosine, nt_xent, symmetrized


def _randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_negative_cosine_minimum_at_identical_inputs() -> None:
    x = _randn(6, 5)
    assert torch.allclose(negative_cosine(x, x), torch.tensor(-1.0))
    assert torch.allclose(negative_cosine(x, 3.0 * x), torch.tensor(-1.0))
    value = negative_cosine(x, _randn(6, 5, seed=1))
    assert -1.0 < value.item() <= 1.0


def test_symmetrized_is_invariant_to_swapping_views() -> None:
    p1, z1, p2, z2 = (_randn(4, 3, seed=s) for s in range(4))
    a = symmetrized(negative_cosine, p1, z2, p2, z1)
    b = symmetrized(negative_cosine, p2, z1, p1, z2)
    assert torch.allclose(a, b)
    assert torch.allclose(a, 0.5 * (negative_cosine(p1, z2) + negative_cosine(p2, z1)))


@pytest.mark.parametrize(
    "loss",
    [negative_cosine, byol_loss, partial(info_nce, temperature=0.5)],
    ids=["simsiam", "byol", "nce"],
)
def test_no_gradient_reaches_the_stop_grad_argument(loss) -> None:
    p = _randn(4, 3).requires_grad_()
    z = _randn(4, 3, seed=1).requires_grad_()
    loss(p, z).backward()
    assert p.grad is not None and p.grad.abs().sum() > 0
    assert z.grad is None


def test_info_nce_stop_grad_false_lets_gradient_reach_keys() -> None:
    q = _randn(4, 3).requires_grad_()
    k = _randn(4, 3, seed=1).requires_grad_()
    info_nce(q, k, temperature=0.5, stop_grad=False).backward()
    assert k.grad is not None and k.grad.abs().sum() > 0


def test_byol_is_two_plus_twice_negative_cosine() -> None:
    p, z = _randn(5, 4), _randn(5, 4, seed=1)
    assert torch.allclose(byol_loss(p, z), 2 + 2 * negative_cosine(p, z))


def _cos(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def test_info_nce_in_batch_matches_hand_cross_entropy() -> None:
    q, k, tau = _randn(3, 2), _randn(3, 2, seed=1), 0.5
    ql, kl = q.tolist(), k.tolist()
    expected = 0.0
    for i in range(3):
        logits = [_cos(ql[i], kl[j]) / tau for j in range(3)]
        expected += -logits[i] + math.log(sum(math.exp(s) for s in logits))
    assert info_nce(q, k, temperature=tau).item() == pytest.approx(expected / 3, rel=1e-5)


def test_info_nce_with_queue_matches_hand_cross_entropy() -> None:
    q, k, tau = _randn(3, 2), _randn(3, 2, seed=1), 0.2
    negatives = F.normalize(_randn(4, 2, seed=2), dim=1)
    ql, kl, nl = q.tolist(), k.tolist(), negatives.tolist()
    expected = 0.0
    for i in range(3):
        pos = _cos(ql[i], kl[i]) / tau
        logits = [pos] + [_cos(ql[i], n) / tau for n in nl]
        expected += -pos + math.log(sum(math.exp(s) for s in logits))
    got = info_nce(q, k, temperature=tau, negatives=negatives)
    assert got.item() == pytest.approx(expected / 3, rel=1e-5)


@pytest.mark.parametrize("with_queue", [False, True])
def test_info_nce_lower_when_positives_align(with_queue: bool) -> None:
    q = _randn(8, 6)
    negatives = F.normalize(_randn(16, 6, seed=3), dim=1) if with_queue else None
    aligned = info_nce(q, q + 0.01 * _randn(8, 6, seed=1), temperature=0.5, negatives=negatives)
    shuffled = info_nce(q, q.roll(1, dims=0), temperature=0.5, negatives=negatives)
    assert aligned < shuffled


def test_nt_xent_matches_hand_cross_entropy_over_2b_rows_with_2b_minus_1_logits() -> None:
    """Every row of [own; received] against the 2B - 1 others (own samples as negatives), both directions."""
    own, received, tau = _randn(3, 2), _randn(3, 2, seed=1), 0.5
    rows = own.tolist() + received.tolist()
    expected = 0.0
    for i in range(6):
        others = [j for j in range(6) if j != i]
        assert len(others) == 5
        logits = {j: _cos(rows[i], rows[j]) / tau for j in others}
        positive = (i + 3) % 6
        expected += -logits[positive] + math.log(sum(math.exp(s) for s in logits.values()))
    assert nt_xent(own, received, temperature=tau).item() == pytest.approx(expected / 6, rel=1e-5)


def test_nt_xent_is_symmetric_in_its_halves_and_sends_no_gradient_to_the_received_batch() -> None:
    own, received = _randn(5, 4).requires_grad_(), _randn(5, 4, seed=1).requires_grad_()
    loss = nt_xent(own, received, temperature=0.5)
    assert loss.item() == pytest.approx(nt_xent(received, own, temperature=0.5).item(), rel=1e-6)
    loss.backward()
    assert received.grad is None and own.grad is not None and own.grad.abs().sum() > 0


def test_numeric_arguments_are_keyword_only() -> None:
    q = _randn(2, 2)
    with pytest.raises(TypeError):
        info_nce(q, q, 0.5)  # type: ignore[misc]
