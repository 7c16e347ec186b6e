"""The anchors' attacks against hand-computed or exact oracles: DLI's sign rule, BLI recovering a 4-sample batch,
the malicious optimisers' scaling on known gradients, similarity's nearest-sample rule, ExPLoit on gradients of a
known logistic model, spectral gradient clustering on separated directions."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from vflpriv.attacks.labels.batch_reconstruction import BatchLabelInference, BatchLabelOptions
from vflpriv.attacks.labels.direct import sign_rule
from vflpriv.attacks.labels.gradient_clustering import spectral
from vflpriv.attacks.labels.malicious import MaliciousAdam, MaliciousSGD
from vflpriv.attacks.labels.similarity import kmeans_named, nearest_known
from vflpriv.engine.adversary import ObservedStep
from vflpriv.runner.scoring import hungarian_accuracy


def test_sign_rule_takes_the_first_negative_entry_else_a_random_class_or_under_a_sum_top_the_smallest():
    rows = torch.tensor([[0.2, -0.5, 0.3], [-0.1, -0.2, 0.3], [0.1, 0.2, -0.3], [0.0, 0.4, 1e-9], [0.0, 0.0, 0.0]])
    got = [sign_rule(rows, generator=torch.Generator().manual_seed(s), saturated=True) for s in range(40)]
    assert all(g[:4].tolist() == [1, 0, 2, 0] for g in got)  # a saturated softmax row: its zero is the true class
    assert {int(g[4]) for g in got} == {0, 1, 2}  # a row of zeros: any class, at random
    plain = [sign_rule(rows, generator=torch.Generator().manual_seed(s)) for s in range(40)]
    assert all(g[:3].tolist() == [1, 0, 2] for g in plain) and {int(g[3]) for g in plain} == {0, 1, 2}  # VFLAIR


def test_sign_rule_is_exact_on_softmax_minus_onehot_gradients():
    """aggVFL's gradient for sample i is (softmax(logits_i) - onehot(y_i)) / B: its only negative entry is y_i."""
    g = torch.Generator().manual_seed(1)
    logits, y = torch.randn(50, 7, generator=g), torch.randint(7, (50,), generator=g)
    rows = (logits.softmax(1) - F.one_hot(y, 7)) / 50
    assert torch.equal(sign_rule(rows, generator=g), y)


def _sum_top_step(batch: int = 4, classes: int = 3, seed: int = 0) -> tuple[ObservedStep, torch.Tensor]:
    """One recorded step of aggVFL: the adversary's bottom (a Linear to class logits), its batch, and the gradient
    of CE(z_p + z_a, y) (batch mean) with respect to its logits z_p, the other party's logits z_a unknown to it."""
    g = torch.Generator().manual_seed(seed)
    bottom = nn.Linear(5, classes)
    with torch.no_grad():
        bottom.weight.copy_(torch.randn(classes, 5, generator=g))
        bottom.bias.zero_()
    x = torch.randn(batch, 5, generator=g)
    y = torch.tensor([0, 2, 1, 2][:batch])
    z_p = bottom(x).detach().requires_grad_()
    z_a = torch.randn(batch, classes, generator=g)
    F.cross_entropy(z_p + z_a, y).backward()
    step = ObservedStep(0, 0, torch.arange(batch), x, z_p.detach(), z_p.grad.clone(), bottom)
    return step, y


@pytest.mark.parametrize("match", ["parameters", "embedding"])
def test_bli_recovers_a_four_sample_batch_under_a_sum_top(match):
    step, y = _sum_top_step()
    bli = BatchLabelInference(BatchLabelOptions(match=match, iterations=300))
    recovered = bli.reconstruct(step, "sum", num_classes=3, generator=torch.Generator().manual_seed(5))
    assert torch.equal(recovered, y)


def test_bli_matches_the_parameter_gradient_the_adversary_applied():
    """The true gradient BLI matches is J^T G: the one the adversary's own backward step computes."""
    step, _ = _sum_top_step()
    bli = BatchLabelInference(BatchLabelOptions())
    true, forward, params = bli._true_gradient(step)
    z = step.bottom(step.inputs)
    (z * step.gradient).sum().backward()
    for t, p in zip(true, step.bottom.parameters()):
        assert torch.allclose(t, p.grad)
    assert torch.allclose(forward(), z)


def test_malicious_sgd_scales_each_step_by_the_clamped_ratio_to_the_last():
    """Fu et al.: r = clamp(1 + g_t / g_{t-1}, 1, 5), no scaling on the first step; lr 0.1, no momentum."""
    p = nn.Parameter(torch.zeros(3))
    opt = MaliciousSGD([p], lr=0.1)
    p.grad = torch.tensor([1.0, 2.0, 1.0])
    opt.step()
    assert torch.allclose(p.data, torch.tensor([-0.1, -0.2, -0.1]))
    p.grad = torch.tensor([2.0, -1.0, 10.0])  # ratios 1 + 2/1 = 3, 1 - 1/2 -> 1, 1 + 10 -> 5
    opt.step()
    assert torch.allclose(p.data, torch.tensor([-0.1 - 0.6, -0.2 + 0.1, -0.1 - 5.0]), atol=1e-6)


def test_malicious_sgd_momentum_buffer_carries_the_scaling_as_in_fu_et_al():
    """Their scaled gradient aliases the momentum buffer: buf_2 = r * (m * buf_1 + g_2)."""
    p = nn.Parameter(torch.zeros(1))
    opt = MaliciousSGD([p], lr=1.0, momentum=0.5)
    p.grad = torch.tensor([1.0])
    opt.step()  # buf = 1, step 1
    p.grad = torch.tensor([1.0])
    opt.step()  # buf = 0.5 + 1 = 1.5, r = 1 + 1.5 / 1 = 2.5, buf -> 3.75, step 3.75
    assert torch.allclose(p.data, torch.tensor([-1.0 - 3.75]))
    assert torch.allclose(opt.state[p]["momentum_buffer"], torch.tensor([3.75]))


def test_malicious_adam_scales_the_adam_direction():
    """VFLAIR: the same ratio on m_hat / (sqrt(v_hat) + eps); with a constant gradient the direction is 1 each
    step, so the second update is clamp(1 + 1/1) = 2 times the first."""
    p = nn.Parameter(torch.zeros(2))
    opt = MaliciousAdam([p], lr=0.01, eps=0.0)
    p.grad = torch.tensor([0.3, -0.7])
    opt.step()
    assert torch.allclose(p.data, torch.tensor([-0.01, 0.01]))  # Adam's first step: lr * sign(g)
    p.grad = torch.tensor([0.3, -0.7])
    opt.step()
    assert torch.allclose(p.data, torch.tensor([-0.01 - 0.02, 0.01 + 0.02]))


def test_nearest_known_rule_by_hand():
    known = F.normalize(torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]), dim=1)
    labels = torch.tensor([0, 1, 2])
    rows = F.normalize(torch.tensor([[0.9, 0.2], [0.1, 0.8], [-0.7, -0.1], [0.6, 0.7]]), dim=1)
    assert nearest_known(rows, known, labels, metric="cosine").tolist() == [0, 1, 2, 1]
    assert nearest_known(rows, known, labels, metric="euclidean").tolist() == [0, 1, 2, 1]


def test_kmeans_named_by_known_samples_recovers_separated_groups():
    g = torch.Generator().manual_seed(3)
    centres = torch.eye(4) * 5
    y = torch.arange(4).repeat_interleave(25)
    rows = centres[y] + 0.3 * torch.randn(100, 4, generator=g)
    known_idx = torch.tensor([0, 1, 25, 26, 50, 51, 75, 76])
    got = kmeans_named(rows.double(), rows[known_idx].double(), y[known_idx], classes=4, generator=g)
    assert torch.equal(got, y)


def test_spectral_gradient_clustering_separates_gradient_directions():
    g = torch.Generator().manual_seed(4)
    directions = F.normalize(torch.randn(3, 16, generator=g), dim=1)
    y = torch.arange(3).repeat_interleave(30)
    rows = directions[y] * torch.rand(90, 1, generator=g).add(0.5) + 0.05 * torch.randn(90, 16, generator=g)
    fit = spectral(rows, k=3, generator=g)
    assert hungarian_accuracy(fit.labels, y) == 1.0
    assert fit.centroids.shape == (3, 16)


def test_exploit_recovers_labels_from_the_gradients_of_a_logistic_top():
    """Gradients of a binary softmax top over the adversary's embedding (the other party's contribution folded in
    a per-sample offset): ExPLoit fits surrogate labels to them; its aux-trained proxy orients them."""
    from vflpriv.attacks.labels.exploit import ExPLoit, ExploitOptions

    g = torch.Generator().manual_seed(7)
    n, d = 120, 8
    w = torch.randn(d, generator=g)
    y = torch.randint(2, (n,), generator=g)
    h = torch.randn(n, d, generator=g) + (2 * y[:, None] - 1) * w * 0.3  # embeddings that carry some of the label
    offset = torch.randn(n, generator=g)
    p1 = torch.sigmoid(h @ w + offset)
    batch = 20
    grads = ((p1 - y.float())[:, None] * w[None]) / batch  # d mean-CE / d h for a logit difference h @ w + offset
    steps = tuple(ObservedStep(3, i, torch.arange(i * batch, (i + 1) * batch), h[i * batch:(i + 1) * batch],
                               h[i * batch:(i + 1) * batch], grads[i * batch:(i + 1) * batch], None)
                  for i in range(n // batch))
    aux_y = torch.tensor([0, 1] * 20)
    aux_x = torch.randn(40, d, generator=g) + (2 * aux_y[:, None] - 1) * w * 0.3
    encoder = nn.Identity()
    encoder.out_dim = d
    view = SimpleNamespace(target_ids={"train": torch.arange(n)}, targets={"train": h}, steps=steps, aux_y=aux_y,
                           aux_x=aux_x, generator=torch.Generator().manual_seed(0), encoder=encoder, num_classes=2,
                           device=torch.device("cpu"))
    inference = ExPLoit(ExploitOptions(epochs=600, proxy_epochs=100)).infer(view)["train"]
    assert bool(inference.covered.all())
    assert (inference.predictions == y).float().mean() >= 0.95
