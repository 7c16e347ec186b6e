"""The anchors' defenses against hand-computed oracles: MID's KL term, dCor of known matrices, CAE's
decode(encode(y)) = y, DiscreteSGD's grid, GradPerturb's per-class mixture on a two-class toy, Gaussian DP's
clipping, noise scale and epsilon against Opacus' accountant, sparsification's error feedback, mixup's mixture."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from vflpriv.config.registry import DEFENSES
from vflpriv.defenses.cae import CAEOptions, WideningLinear, train_autoencoder
from vflpriv.defenses.dcor import distance_correlation
from vflpriv.defenses.discrete_sgd import discretise, grid_step
from vflpriv.defenses.grad_perturb import laplace
from vflpriv.defenses.mid import kl_to_standard_normal
from vflpriv.engine import FINETUNE, GRADIENT, Message


def _defense(name: str, strength: float, *, options: dict | None = None, kinds=None, seed: int = 0):
    cls = DEFENSES.get(name)
    return cls(strength=strength, party=0, phase="finetune", kinds=kinds if kinds is not None else
               (list(cls.default_kinds) or None), options=cls.Options.model_validate(options or {}),
               generator=torch.Generator().manual_seed(seed))


def _gradient_message(payload: torch.Tensor, receiver: int = 1) -> Message:
    return Message(GRADIENT, FINETUNE, 0, receiver, payload, torch.arange(payload.shape[0]), 0)


def test_mid_kl_term_by_hand():
    mu = torch.tensor([[0.0, 1.0], [2.0, 0.0]])
    std = torch.tensor([[1.0, 1.0], [0.5, 2.0]])
    # per entry -0.5 (1 + 2 log s - m^2 - s^2): row 1: 0 + 0.5; row 2: (1.625 - ln 0.5) + (1.5 - ln 2)
    expected = (0.5 + (1.625 - math.log(0.5) + 1.5 - math.log(2.0))) / 2
    assert kl_to_standard_normal(mu, std).item() == pytest.approx(expected)
    assert kl_to_standard_normal(torch.zeros(3, 4), torch.ones(3, 4)).item() == 0.0


def test_distance_correlation_of_known_matrices():
    x = torch.tensor([[0.0], [0.0], [1.0], [1.0]])
    y = torch.tensor([[0.0], [1.0], [0.0], [1.0]])  # every (x, y) pair once: the empirical joint is the product
    assert distance_correlation(x, y).item() == pytest.approx(0.0, abs=1e-5)
    g = torch.Generator().manual_seed(0)
    z = torch.randn(50, 3, generator=g)
    rotation, _ = torch.linalg.qr(torch.randn(3, 3, generator=g))
    assert distance_correlation(z, 2.5 * z @ rotation + 4.0).item() == pytest.approx(1.0, abs=1e-4)
    independent = distance_correlation(torch.randn(400, 2, generator=g), torch.randn(400, 2, generator=g)).item()
    assert independent < 0.2  # a sample estimate: small, not zero


def test_cae_decodes_what_it_encodes_and_confuses_on_the_way():
    ae = train_autoencoder(4, strength=0.5, options=CAEOptions(samples=4000, epochs=5),
                           generator=torch.Generator().manual_seed(0), device=torch.device("cpu"))
    y = torch.arange(4).repeat(25)
    fake = ae.encode(F.one_hot(y, 4).float())
    assert torch.equal(ae.decode(fake).argmax(1), y)
    assert (fake.argmax(1) == y).float().mean() < 0.5  # the fake labels are not the labels
    assert torch.allclose(fake.sum(1), torch.ones(100))


def test_the_autoencoders_widening_layer_is_a_linear_layer_with_its_gradients():
    """Same parameters, outputs bit for bit and gradients (to float rounding) as ``nn.Linear``: only the order of the
    weight gradient's product differs."""
    g = torch.Generator().manual_seed(0)
    plain = torch.nn.Linear(3, 50)
    wide = WideningLinear(3, 50)
    wide.load_state_dict(plain.state_dict())
    x, upstream = torch.randn(7, 3, generator=g, requires_grad=True), torch.randn(7, 50, generator=g)
    x2 = x.detach().clone().requires_grad_(True)
    assert torch.equal(wide(x2), plain(x))
    plain(x).backward(upstream)
    wide(x2).backward(upstream)
    for a, b in [(plain.weight.grad, wide.weight.grad), (plain.bias.grad, wide.bias.grad), (x.grad, x2.grad)]:
        assert a.shape == b.shape and torch.allclose(a, b, atol=1e-6)


def test_discretisation_rounds_to_the_grid_set_by_the_first_message():
    g = torch.Generator().manual_seed(1)
    first, second = torch.randn(16, 8, generator=g), 3 * torch.randn(16, 8, generator=g)
    defense = _defense("discrete-sgd", 6)
    step = 2 * first.std().item() / ((6 + 1) // 2)
    assert grid_step(first, bins=6) == pytest.approx(step)
    for payload in (first, second):  # the step stays the one of the first message to this receiver
        sent = defense(payload, _gradient_message(payload))
        assert torch.allclose(sent / step, torch.round(sent / step), atol=1e-4)
        assert (sent - payload).abs().max() <= step / 2 + 1e-6
    assert torch.equal(discretise(torch.tensor([0.24, 0.26, -0.74]), step=0.5), torch.tensor([0.0, 0.5, -0.5]))


def test_grad_perturb_sends_the_gradient_plus_the_laplace_mixture_of_per_class_gradients():
    """Two classes, a Linear top: the per-class gradients are known, the mixture is G + u0 G0 + u1 G1."""
    torch.manual_seed(0)
    h = torch.randn(6, 3, requires_grad=True)
    top = nn.Linear(3, 2)
    y = torch.tensor([0, 1, 0, 1, 1, 0])
    logits = top(h)
    true = torch.autograd.grad(F.cross_entropy(logits, y), h, retain_graph=True)[0]
    per_class = {c: torch.autograd.grad(F.cross_entropy(logits, torch.full_like(y, c)), h, retain_graph=True)[0]
                 for c in (0, 1)}
    defense = _defense("grad-perturb", 0.5, seed=3)
    defense.num_classes = 2
    sent = defense.sent_gradient(1, true, lambda c: per_class[c])
    u = laplace((6, 2), scale=2 / 0.5, generator=torch.Generator().manual_seed(3))
    assert torch.allclose(sent, true + u[:, :1] * per_class[0] + u[:, 1:] * per_class[1], atol=1e-6)
    draws = laplace((200000,), scale=4.0, generator=torch.Generator().manual_seed(4))
    assert draws.mean().item() == pytest.approx(0.0, abs=0.05) and draws.var().item() == pytest.approx(2 * 16, rel=0.03)


def test_gaussian_message_clips_rows_adds_sigma_c_noise_and_claims_no_epsilon():
    clip, sigma = 0.5, 2.0
    defense = _defense("gaussian-message", sigma, options={"clip": clip})
    g = torch.Generator().manual_seed(0)
    big = torch.randn(100, 64, generator=g) * 10
    sent = defense(big, _gradient_message(big))
    clipped = big / (big.norm(dim=1, keepdim=True) / clip).clamp_min(1.0)
    assert (sent - clipped).std().item() == pytest.approx(sigma * clip, rel=0.03)  # the noise: N(0, (sigma C)^2)
    quiet = _defense("gaussian-message", 1e-9, options={"clip": clip})
    small = torch.randn(100, 64, generator=g) * 0.01
    assert (quiet(big, _gradient_message(big)).norm(dim=1) <= clip + 1e-4).all()  # rows clipped to C
    assert torch.allclose(quiet(small, _gradient_message(small)), small, atol=1e-6)  # rows within C pass unchanged
    assert defense.privacy_spent() is None  # its accountant's epsilon would bound nothing of the labels


def test_sparsify_error_feedback_delays_dropped_gradient_mass_and_never_loses_it():
    defense = _defense("sparsify", 75.0, options={"error_feedback": True})
    g = torch.Generator().manual_seed(2)
    messages = [torch.randn(4, 4, generator=g) for _ in range(5)]
    sent = [defense(m, _gradient_message(m)) for m in messages]
    residual = defense.residual[(1, "gradient")]
    assert torch.allclose(sum(sent) + residual, sum(messages), atol=1e-5)
    assert all(int((s != 0).sum()) == 4 for s in sent)  # 75% of 16 entries zeroed in each message


def test_mixup_mixes_inputs_and_targets_with_one_permutation_per_batch_size():
    defense = _defense("mixup", 0.6)
    defense.num_classes = 3
    x, y = torch.arange(12.0).reshape(4, 3), torch.tensor([0, 1, 2, 1])
    mixed_x, targets = defense.active_batch(x, y)
    perm = defense.permutation(4, x.device)
    assert torch.allclose(mixed_x, 0.6 * x + 0.4 * x[perm])
    assert torch.allclose(targets, 0.6 * F.one_hot(y, 3) + 0.4 * F.one_hot(y[perm], 3))
    assert torch.equal(defense.permutation(4, x.device), perm)
    assert torch.allclose(targets.sum(1), torch.ones(4))


@pytest.mark.parametrize("name", DEFENSES.names())
def test_every_defense_at_its_identity_changes_nothing_bit_for_bit(name):
    """A defense listed without a strength is at its identity (0 for scales and weights, +inf for an epsilon or
    a number of bins, 1 for mixup's lam): the run's numbers are those of no defense, bit for bit."""
    from vflpriv.config.schema import RunConfig
    from vflpriv.runner.execution import run

    binary = DEFENSES.get(name).binary_only
    base = {"dataset": {"name": "breast-cancer" if binary else "digits"}, "model": {"hidden": 32, "out_dim": 16},
            "finetune": {"epochs": 2, "batch_size": 32}, "partition": {"labeled": 60, "aux": 20},
            "attack": {"name": "gc", "prior": "none"}}
    plain, = run(RunConfig.model_validate(base))
    defended, = run(RunConfig.model_validate({**base, "defenses": [{"name": name}]}))
    assert defended.status == "ok", defended.error
    for field in ("utility", "attack_accuracy", "comm_mb", "comm_messages"):
        assert getattr(defended, field) == getattr(plain, field), field


@pytest.mark.parametrize("shape", [(5, 3), (3, 7), (4, 2, 3)])
def test_gaussian_message_clips_each_sample_s_row_alone(shape):
    """Rows are the samples (the first axis, the rest flattened): a huge row is cut to C, the small rows beside it
    pass untouched."""
    from vflpriv.defenses.gaussian_message import clip_rows

    g = torch.Generator().manual_seed(5)
    tensor = torch.randn(*shape, generator=g) * 0.01
    tensor[1] = torch.randn(*shape[1:], generator=g) * 100
    clipped = clip_rows(tensor, clip=0.5)
    assert clipped.shape == tensor.shape
    assert clipped[1].norm().item() == pytest.approx(0.5, rel=1e-5)
    assert torch.allclose(clipped[1], tensor[1] * 0.5 / tensor[1].norm())  # scaled, not reshaped
    others = [i for i in range(shape[0]) if i != 1]
    assert torch.equal(clipped[others], tensor[others])


def test_label_autoencoder_in_place_relus_give_the_same_values_and_gradients():
    """CAE's autoencoder applies its ReLUs in place: outputs and every gradient equal those of out-of-place ReLUs."""
    from vflpriv.defenses.cae import LabelAutoencoder

    g = torch.Generator().manual_seed(0)
    fast = LabelAutoencoder(3)
    plain = LabelAutoencoder(3)
    plain.load_state_dict(fast.state_dict())
    for part in (plain.encoder, plain.decoder):
        part[1] = nn.ReLU()
    y = torch.randn(9, 3, generator=g).softmax(1)
    losses = [ae.decode(ae.encode(y)).log().sum() + ae.encode(y).square().sum() for ae in (fast, plain)]
    assert torch.equal(losses[0], losses[1])
    for loss in losses:
        loss.backward()
    for a, b in zip(fast.parameters(), plain.parameters()):
        assert torch.equal(a.grad, b.grad)
    assert all(isinstance(part[1], nn.ReLU) and part[1].inplace for part in (fast.encoder, fast.decoder))
