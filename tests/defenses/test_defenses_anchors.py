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
from vflpriv.defenses.cae import CAEOptions, train_autoencoder
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


@pytest.mark.parametrize("classes", [20, 26, 100])
def test_cae_sharpens_many_classes_at_its_default_temperature_without_nan(classes):
    """Review lo5 F2: p^(1/0.025) underflowed to 0 / 0 in 402 of 1000 rows on 20 classes, every row on 26 (letter)."""
    from vflpriv.defenses.cae import sharpen

    p = torch.rand(1000, classes, generator=torch.Generator().manual_seed(0)).softmax(1)
    q = sharpen(p, temperature=CAEOptions().temperature)
    assert torch.isfinite(q).all() and torch.allclose(q.sum(1), torch.ones(1000))
    assert torch.equal(q.argmax(1), p.argmax(1)) and (q.max(1).values > p.max(1).values).all()


@pytest.mark.parametrize("classes", [2, 10, 26, 100])
def test_cae_sharpens_as_exactly_as_float32_allows(classes):
    """Review lo6 F7: against float64's p^(1/T), (p / max p)^(1/T) is off by 3.5e-7 at most (p^(1/T): 2.2e-7 on 10
    classes, NaN on 26); the softmax of log(p) / T of revision 2 by 7.5e-7 on 2 classes, 2.4e-6 on 10."""
    from vflpriv.defenses.cae import sharpen

    p = torch.rand(1000, classes, generator=torch.Generator().manual_seed(0)).softmax(1)
    exact = (p.double().log() / CAEOptions().temperature).softmax(1)
    assert (sharpen(p, temperature=CAEOptions().temperature).double() - exact).abs().max() < 5e-7


#: Strength 0.5's run and training keys at each revision: 1, p^(1/T); 2, log space; 3, (p / max p)^(1/T).
CAE_KEYS = {"cae": {1: ("67bb6451521d7c404e80", "34527c8e42f711f721e6"), 2: ("f5725cd5b2c3cd42367d",
                                                                           "3de615cb211207ecee37"),
                    3: ("d3988e3fa64bc737a0db", "245378888d28eed52ef1")},
            "dcae": {1: ("8c71407c7593c19357c0", "92518d5e4b9dddb702a4"), 2: ("7ce8016e43b8d58c4922",
                                                                            "70dfb1e4a8ba09f28a41"),
                     3: ("387c003188ba03550cf6", "a67d414ba35b7e8e1c9a")}}


@pytest.mark.parametrize("name", sorted(CAE_KEYS))
def test_cae_s_current_sharpen_is_keyed_apart_from_its_earlier_revisions(name):
    """The keys are revision 3's, pinned (a store of revision 1's or 2's runs is recomputed, not resumed)."""
    from vflpriv.config.schema import RunConfig

    cfg = RunConfig.model_validate({"defenses": [{"name": name, "strength": 0.5}]})
    assert (cfg.key(), cfg.training_key()) == CAE_KEYS[name][3]
    assert len(set(CAE_KEYS[name].values())) == 3


def _autograd_autoencoder(classes: int, *, strength: float, options: CAEOptions, generator: torch.Generator):
    """The reference: SecretFlow's training of the modules by autograd, the loss as written (the training before its
    gradients were written out)."""
    from vflpriv.defenses.cae import LabelAutoencoder, sharpen
    from vflpriv.models.training import make_optimizer

    model = LabelAutoencoder(classes)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Linear):
                m.weight.copy_(torch.randn(m.weight.shape, generator=generator) * 0.01)
                m.bias.zero_()
    y = sharpen(torch.rand(options.samples, classes, generator=generator).softmax(1), temperature=options.temperature)
    opt = make_optimizer(model.parameters(), name="adam", lr=options.lr, weight_decay=0.0)
    for _ in range(options.epochs):
        for start in range(0, options.samples, options.batch_size):
            batch = y[start:start + options.batch_size]
            fake = model.encode(batch)
            entropy = (-fake * (fake + 1e-6).log()).mean()
            loss = 10 * F.cross_entropy(model.decode(fake), batch) - strength * entropy - F.cross_entropy(fake, batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return model.eval()


def test_the_autoencoders_written_out_gradients_are_autograds_of_the_loss_as_written():
    """One step's gradients of every parameter, written out (``_Pair``, ``_loss_gradients``), equal autograd's of
    10 CE(dec(enc(y)), y) - lambda H(enc(y)) - CE(enc(y), y) on the modules, to float rounding (biases non-zero)."""
    from vflpriv.defenses.cae import LabelAutoencoder, _loss_gradients, _Pair, sharpen

    torch.manual_seed(0)
    classes, rows, strength = 4, 7, 0.7
    y = sharpen(torch.rand(rows, classes).softmax(1), temperature=0.3)
    model = LabelAutoencoder(classes)
    for m in model.modules():
        if isinstance(m, nn.Linear):
            m.bias.data.normal_(0, 0.1)
    hidden = model.encoder[0].out_features
    flat = torch.zeros(2 * _Pair.size(classes, hidden))
    flat.grad = torch.full_like(flat, float("nan"))  # every entry must be written
    pairs = [_Pair(flat, flat.grad, k, classes, hidden) for k in range(2)]
    with torch.no_grad():
        for pair, seq in zip(pairs, (model.encoder, model.decoder)):
            pair.first[:classes].copy_(seq[0].weight.t())
            pair.first[classes].copy_(seq[0].bias)
            pair.second.copy_(seq[2].weight)
            pair.bias.copy_(seq[2].bias)
    fake = model.encode(y)
    entropy = (-fake * (fake + 1e-6).log()).mean()
    (10 * F.cross_entropy(model.decode(fake), y) - strength * entropy - F.cross_entropy(fake, y)).backward()
    encoded = pairs[0].forward(y.t())
    decoded = pairs[1].forward(encoded)
    assert torch.allclose(encoded.t(), fake, atol=1e-6) and torch.allclose(decoded.t(), model.decode(fake), atol=1e-6)
    entropy, upstream, cross = _loss_gradients(y.t(), encoded, decoded, strength)
    upstream = entropy + pairs[1].backward(upstream, inputs=True) - cross
    pairs[0].backward(encoded * (upstream - (upstream * encoded).sum(0, keepdim=True)), inputs=False)
    for pair, seq in zip(pairs, (model.encoder, model.decoder)):
        first, second, bias = pair.grads
        for written, reference in ((first[:classes].t(), seq[0].weight.grad), (first[classes], seq[0].bias.grad),
                                   (second, seq[2].weight.grad), (bias, seq[2].bias.grad)):
            assert float(reference.abs().max()) > 1e-5  # a gradient that is there to check
            assert torch.allclose(written, reference, rtol=1e-4, atol=1e-8)


def test_the_autoencoders_training_is_autograds_training_to_float_rounding():
    """The same draws, the same steps: its outputs on the one-hot rows and on random rows equal the autograd
    reference's to float rounding."""
    options = CAEOptions(samples=300, epochs=3, batch_size=32)
    ours = train_autoencoder(3, strength=0.5, options=options, generator=torch.Generator().manual_seed(0),
                             device=torch.device("cpu"))
    reference = _autograd_autoencoder(3, strength=0.5, options=options, generator=torch.Generator().manual_seed(0))
    rows = torch.cat([torch.eye(3), torch.rand(50, 3, generator=torch.Generator().manual_seed(1)).softmax(1)])
    with torch.no_grad():
        assert float(reference.encoder[0].bias.abs().max()) > 1e-4  # it trained (the biases start at 0)
        for ae in (ours, reference):
            assert not ae.training
        assert torch.allclose(ours.encode(rows), reference.encode(rows), atol=1e-5)
        assert torch.allclose(ours.decode(rows), reference.decode(rows), atol=1e-5)


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
