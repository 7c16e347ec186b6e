"""The defenses of a passive party's features at its own hook points: strength 0 is the identity bit for bit, NoPeek's
dCor is Szekely's, MID at the sender sends its bottleneck's sample, and fi-adversarial's imagined decoder learns from
the victim's own training rows only, changes a pretraining and leaves it label-free."""

from __future__ import annotations

import copy
import dataclasses
import math

import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from vflpriv.config.schema import RunConfig
from vflpriv.defenses.fi_adversarial import FIAdversarial
from vflpriv.defenses.mid import kl_to_standard_normal
from vflpriv.engine import ACTIVE, FINETUNE, PRETRAIN
from vflpriv.runner import execution
from vflpriv.runner.execution import run
from vflpriv.runner.planning import plan

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "methods"))
from pretrain_helpers import TINY_MODEL, build_federation, tiny_options  # noqa: E402

FEATURE_DEFENSES = ["nopeek", "mid-sender", "fi-adversarial", "embedding-dp"]
PRETRAINING = ["nopeek", "fi-adversarial"]


def _config(method: str = "splitnn", defenses=(), *, local_updates: int = 1, seed: int = 0) -> RunConfig:
    return RunConfig.model_validate({
        "partition": {"labeled": 100, "aux": 40}, "model": TINY_MODEL, "seed": seed,
        "finetune": {"epochs": 2, "batch_size": 32, "local_updates": local_updates},
        "method": {"name": method, "options": tiny_options(method)}, "defenses": list(defenses),
        "attack": {"name": "fi-decoder", "options": {"epochs": 3}}})


def _numbers(record) -> tuple:
    assert record.status == "ok", record.error
    return record.utility, record.feature_mse, record.attack_errors, record.prior_errors, record.traffic


@pytest.mark.parametrize("local_updates", [1, 2])
@pytest.mark.parametrize("name", FEATURE_DEFENSES)
def test_strength_zero_is_the_identity_bit_for_bit_in_finetuning(name, local_updates):
    (plain,) = run(_config(local_updates=local_updates))
    (zero,) = run(_config(defenses=[{"name": name, "strength": 0.0, "sweep": True}], local_updates=local_updates))
    (acting,) = run(_config(defenses=[{"name": name, "strength": 1.0, "sweep": True}], local_updates=local_updates))
    assert _numbers(zero) == _numbers(plain)
    assert _numbers(acting)[:3] != _numbers(plain)[:3]  # and at strength 1 it does act


def _pretrained(method: str, defenses=(), *, relabel: bool = False) -> list[dict]:
    """The encoders ``method`` pretrains (no cache) under ``defenses``; with ``relabel``, every training label of the
    dataset is another class, from before the federation (and its defenses) are built."""
    p = plan(_config(method, defenses))
    if relabel:
        ds = p.scenario.dataset
        shift = 1 + torch.arange(ds.y_train.numel()) % (ds.num_classes - 1)
        p.scenario = dataclasses.replace(p.scenario, dataset=dataclasses.replace(
            ds, y_train=(ds.y_train + shift) % ds.num_classes))
    fed = execution.build_federation(p)
    return [copy.deepcopy(m.state_dict()) for m in p.method.pretrain(fed)]


def _same(a: list[dict], b: list[dict]) -> bool:
    return all(torch.equal(x[k], y[k]) for x, y in zip(a, b) for k in x)


@pytest.mark.parametrize("method", ["local-simsiam", "fedhssl"])
@pytest.mark.parametrize("name", PRETRAINING)
def test_in_pretraining_strength_zero_is_the_identity_and_a_strength_changes_the_victim_s_bottom_only(name, method):
    plain = _pretrained(method)
    zero = _pretrained(method, [{"name": name, "strength": 0.0, "phase": "pretrain"}])
    acting = _pretrained(method, [{"name": name, "strength": 1.0, "phase": "pretrain"}])
    assert _same(zero, plain)
    assert not _same(acting[1:], plain[1:])  # the victim's encoder moved
    if method == "local-simsiam":  # the active party pretrains alone: nothing of the victim's defense reaches it
        assert _same(acting[:1], plain[:1])


@pytest.mark.parametrize("method", ["local-simsiam", "cssl-simsiam"])
def test_attacker_aware_pretraining_stays_label_free(method):
    """fi-adversarial in pretraining reads the victim's views and its encoder only: the pretrained encoders do not
    change when every label the active party holds does."""
    fi = [{"name": "fi-adversarial", "strength": 1.0, "phase": "pretrain"}]
    assert _same(_pretrained(method, fi, relabel=True), _pretrained(method, fi))


def _reference_dcor(x: np.ndarray, y: np.ndarray) -> float:
    """Sample distance correlation (Szekely, Rizzo & Bakirov 2007, Definition 4), with loops."""
    n = len(x)

    def centred(z):
        d = [[float(np.sqrt(((z[i] - z[j]) ** 2).sum())) for j in range(n)] for i in range(n)]
        rows = [sum(r) / n for r in d]
        grand = sum(rows) / n
        return [[d[i][j] - rows[i] - rows[j] + grand for j in range(n)] for i in range(n)]

    a, b = centred(x.reshape(n, -1)), centred(y.reshape(n, -1))
    v = lambda p, q: sum(p[i][j] * q[i][j] for i in range(n) for j in range(n)) / n**2  # noqa: E731
    return math.sqrt(v(a, b) / math.sqrt(v(a, a) * v(b, b)))


def _defense(config: RunConfig, index: int = 0):
    p, fed = build_federation(config)
    return p.defenses[index], fed


def test_nopeek_adds_lambda_times_the_distance_correlation_of_features_and_embedding():
    nopeek, _ = _defense(_config(defenses=[{"name": "nopeek", "strength": 0.7}]))
    g = torch.Generator().manual_seed(0)
    x = torch.rand(9, 1, 3, 2, generator=g)  # image-like features: flattened per sample
    sent = torch.randn(9, 5, generator=g) + x.flatten(1)[:, :5] ** 2
    term = nopeek.passive_loss(1, FINETUNE, x, sent)
    assert float(term) == pytest.approx(0.7 * _reference_dcor(x.numpy(), sent.numpy()), rel=1e-5)
    assert nopeek.passive_loss(ACTIVE, FINETUNE, x, sent) is None  # the active party is not protected
    assert nopeek.passive_loss(1, PRETRAIN, x, sent) is None  # a finetuning instance does not act in pretraining
    independent = torch.randn(400, 3, generator=g), torch.randn(400, 4, generator=g)
    assert float(nopeek.passive_loss(1, FINETUNE, *independent)) < 0.7 * 0.2  # near 0 for independent data


def test_mid_sender_sends_its_bottleneck_s_noisy_sample_and_adds_lambda_times_its_kl():
    mid, fed = _defense(_config(defenses=[{"name": "mid-sender", "strength": 0.3}]))
    bottom = nn.Linear(6, 4)
    bottom.out_dim = 4
    wrapped = mid.passive_bottom(1, bottom)
    assert mid.passive_bottom(ACTIVE, bottom) is bottom
    x = torch.randn(5, 6)
    state = mid.generator.get_state()
    sent = wrapped(x)
    neck = wrapped.bottleneck
    mu, raw = neck.encoder(bottom(x)).split(neck.inner, dim=1)
    std = nn.functional.softplus(raw - neck.std_shift)
    mid.generator.set_state(state)
    noise = torch.randn((5, neck.inner), generator=mid.generator)
    assert torch.allclose(sent, neck.decoder(mu + std * noise))
    term = mid.passive_loss(1, FINETUNE, x, sent)
    assert float(term.detach()) == pytest.approx(0.3 * float(kl_to_standard_normal(mu, std).detach()), rel=1e-6)
    assert mid.passive_loss(1, FINETUNE, x, sent) is None  # the KL of one forward pass is charged once


def test_mid_sender_s_bottleneck_trains_with_the_victim_s_optimiser():
    config = _config(defenses=[{"name": "mid-sender", "strength": 0.1}])
    p, fed = build_federation(config)
    wrapped = p.method.finetune(fed, None).bottoms[1]
    assert p.defenses[0].wrapped[1] is wrapped  # the victim holds (and the adversary's view never gets) its bottleneck
    fresh, _ = _defense(config)  # the same stream: the bottleneck's initial weights
    initial = fresh.passive_bottom(1, copy.deepcopy(wrapped.bottom)).bottleneck.state_dict()
    assert all(a.shape == b.shape for a, b in zip(initial.values(), wrapped.bottleneck.state_dict().values()))
    assert not any(torch.equal(a, b) for a, b in zip(initial.values(), wrapped.bottleneck.state_dict().values()))


def _fi(**options) -> FIAdversarial:
    fi, _ = _defense(_config(defenses=[{"name": "fi-adversarial", "strength": 2.0, "options": options}]))
    return fi


@pytest.mark.parametrize("threshold", [None, 0.01, 10.0])
def test_fi_adversarial_s_mse_term_is_minus_alpha_times_the_imagined_decoder_s_error_capped_at_tau(threshold):
    """Value and gradient of the victim's term: -alpha * min(MSE, tau) of the decoder as the batch meets it (before
    its own step), with no push above tau; the decoder then takes its step, which the term does not change."""
    fi = _fi(threshold=threshold)
    g = torch.Generator().manual_seed(1)
    x = torch.rand(16, 1, 8, 4, generator=g)  # like digits' right halves
    fi.passive_loss(1, FINETUNE, x, torch.randn(16, 32, generator=g))  # builds the decoder; its first step
    net, *_ = fi.decoders[1]
    before = copy.deepcopy(net).train()
    sent = torch.randn(16, 32, generator=g, requires_grad=True)
    term = fi.passive_loss(1, FINETUNE, x, sent)
    target = (x - fi.scales[1][0][0]) / fi.scales[1][1][0]
    error = nn.functional.mse_loss(before(sent), target)
    expected = -2.0 * (error if threshold is None else error.clamp(max=threshold))
    assert float(term.detach()) == pytest.approx(float(expected.detach()), rel=1e-5)
    (want,) = torch.autograd.grad(expected, sent)
    own = [q.grad.clone() for q in net.parameters()]  # from the imagined attacker's step
    term.backward()
    assert torch.allclose(sent.grad, want, atol=1e-7)
    assert (sent.grad.abs().sum() > 0) == (threshold is None or float(error.detach()) < threshold)  # none above tau
    assert all(torch.equal(q.grad, o) for q, o in zip(net.parameters(), own))  # the term trains no decoder
    with torch.no_grad():  # the imagined attacker's step lowered its MSE on the batch
        assert nn.functional.mse_loss(net(sent), target) < nn.functional.mse_loss(before(sent), target)


def test_fi_adversarial_s_written_out_decoder_backward_is_autograd_s_bit_for_bit(monkeypatch):
    """With the MLP decoder the victim's term, its gradient and the imagined decoder's step come from the decoder's
    written-out backward (``mse_gradients(with_input=True)``): the same numbers, bit for bit, as autograd's graph."""
    from vflpriv.models.decoders import MLPDecoder

    def run() -> tuple:
        fi = _fi()
        g = torch.Generator().manual_seed(3)
        x = torch.rand(16, 1, 8, 4, generator=g)
        fi.passive_loss(1, FINETUNE, x, torch.randn(16, 32, generator=g))
        sent = torch.randn(16, 32, generator=g, requires_grad=True)
        term = fi.passive_loss(1, FINETUNE, x, sent)
        term.backward()
        return term.detach(), sent.grad, [q.detach().clone() for q in fi.decoders[1][0].parameters()]

    calls = []
    written_out = MLPDecoder.mse_gradients
    monkeypatch.setattr(MLPDecoder, "mse_gradients", lambda *a, **k: calls.append(1) or written_out(*a, **k))
    direct = run()
    assert len(calls) == 2
    monkeypatch.setattr(MLPDecoder, "mse_gradients", None)  # the graph's path
    graph = run()
    assert torch.equal(direct[0], graph[0]) and torch.equal(direct[1], graph[1])
    assert all(torch.equal(a, b) for a, b in zip(direct[2], graph[2]))


def test_fi_adversarial_s_ssim_term_is_alpha_times_the_ssim_above_tau():
    from vflpriv.common import feature_metrics as fm

    fi = _fi(loss="ssim", threshold=0.0)
    g = torch.Generator().manual_seed(2)
    x = torch.rand(6, 1, 8, 4, generator=g)
    fi.passive_loss(1, FINETUNE, x, torch.randn(6, 32, generator=g))
    before = copy.deepcopy(fi.decoders[1][0]).train()
    sent = torch.randn(6, 32, generator=g, requires_grad=True)
    term = fi.passive_loss(1, FINETUNE, x, sent)
    expected = 2.0 * fm.ssim(before(sent), fm.scaled(x, *fi.scales[1])).mean()
    assert float(term.detach()) == pytest.approx(float(expected.detach()), rel=1e-5)
    term.backward()
    (want,) = torch.autograd.grad(expected, sent)
    assert torch.allclose(sent.grad, want.float(), atol=1e-7)
    net = fi.decoders[1][0]
    with torch.no_grad():  # the imagined attacker's step raised its SSIM on the batch
        truth = fm.scaled(x, *fi.scales[1])
        assert fm.ssim(net(sent), truth).mean() > fm.ssim(before(sent), truth).mean()


def test_the_imagined_decoder_learns_from_the_victim_s_own_training_rows_only(monkeypatch):
    """Every row it is trained on is one of the victim's labeled aligned training rows; the test rows, the other
    parties' features and the adversary's known samples never reach it (the victim's test rows replaced by garbage
    change nothing it trains)."""
    seen: list[torch.Tensor] = []
    original = FIAdversarial.passive_loss

    def spy(self, party, phase, x, sent):
        seen.append(x.detach().clone())
        return original(self, party, phase, x, sent)

    monkeypatch.setattr(FIAdversarial, "passive_loss", spy)
    config = _config(defenses=[{"name": "fi-adversarial", "strength": 1.0}])
    p, fed = build_federation(config)
    trained = p.method.finetune(fed, None)
    victim = fed.parties[1]
    allowed = victim.x_train[fed.labeled_aligned()].flatten(1)
    rows = torch.cat([s.flatten(1) for s in seen])
    assert rows.shape[0] >= fed.labeled_aligned().numel() * fed.finetune.epochs
    assert bool((torch.cdist(rows, allowed).min(1).values == 0).all())
    p2 = plan(config)
    ds = p2.scenario.dataset
    poisoned = dataclasses.replace(ds, x_test=(ds.x_test[0], torch.full_like(ds.x_test[1], 1e6)))
    p2.scenario = dataclasses.replace(p2.scenario, dataset=poisoned)
    fed2 = execution.build_federation(p2)  # the defense is bound to the poisoned federation
    assert bool((fed2.parties[1].x_test == 1e6).all())
    again = p2.method.finetune(fed2, None)
    assert all(torch.equal(a, b) for a, b in zip(trained.bottoms[1].state_dict().values(),
                                                   again.bottoms[1].state_dict().values()))
    assert all(torch.equal(a, b) for a, b in zip(p.defenses[0].decoders[1][0].state_dict().values(),
                                                   p2.defenses[0].decoders[1][0].state_dict().values()))


def test_fi_adversarial_s_bottleneck_is_a_narrow_linear_cut():
    fi = _fi(bottleneck=3)
    bottom = nn.Linear(6, 8)
    bottom.out_dim = 8
    wrapped = fi.passive_bottom(1, bottom)
    out = wrapped(torch.randn(20, 6))
    assert out.shape == (20, 8) and int(torch.linalg.matrix_rank(out - wrapped.expand.bias)) == 3
