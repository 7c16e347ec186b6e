"""The defenses the anchors added: RR-with-prior and ALIBI against their papers' closed forms, FedPass's private
passports, PELoss's potential energy, and the free baseline of a deeper top (finetune.top_depth)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from vflpriv.common.errors import IncompatibleError
from vflpriv.config.registry import DEFENSES
from vflpriv.config.schema import RunConfig
from vflpriv.defenses.alibi import laplace, posterior
from vflpriv.defenses.label_dp import rr_with_prior, top_k_choice
from vflpriv.defenses.peloss import potential_energy
from vflpriv.runner.execution import build_federation, run
from vflpriv.runner.planning import plan


def _frequencies(label: int, prior: torch.Tensor, eps: float, n: int = 200000) -> torch.Tensor:
    out = rr_with_prior(torch.full((n,), label), prior.expand(n, -1), epsilon=eps,
                        generator=torch.Generator().manual_seed(label))
    return torch.bincount(out, minlength=prior.numel()).double() / n


@pytest.mark.parametrize("eps", [0.5, 1.0, 3.0])
def test_rr_with_prior_keeps_within_the_top_k_as_ghazi_et_al_s_closed_form(eps):
    prior = torch.tensor([0.5, 0.3, 0.1, 0.06, 0.04])
    k = int(top_k_choice(prior[None], epsilon=eps))
    keep = [math.exp(eps) / (math.exp(eps) + j - 1) * float(prior.sort(descending=True).values[:j].sum())
            for j in range(1, 6)]
    assert k == 1 + max(range(5), key=lambda j: keep[j])  # k* maximises P[right] under the prior
    inside, outside = math.exp(eps) / (math.exp(eps) + k - 1), 1 / (math.exp(eps) + k - 1)
    for label in range(5):
        expected = torch.zeros(5, dtype=torch.float64)
        if label < k:  # the prior's order is the index order here
            expected[:k] = outside
            expected[label] = inside
        else:
            expected[:k] = 1 / k
        assert torch.allclose(_frequencies(label, prior, eps), expected, atol=4e-3)
    worst = max(_frequencies(a, prior, eps)[o] / _frequencies(b, prior, eps)[o]
                for a in range(5) for b in range(5) for o in range(k))
    assert worst <= math.exp(eps) * 1.05  # eps-label-DP, up to sampling error


def test_a_uniform_prior_makes_rr_with_prior_plain_randomised_response():
    assert int(top_k_choice(torch.full((1, 10), 0.1), epsilon=1.0)) == 10


def test_alibi_s_posterior_is_the_laplace_likelihood_under_a_uniform_prior_by_hand():
    eps, noisy = 2.0, torch.tensor([[0.9, 0.4, -0.3]], dtype=torch.float64)
    likelihood = torch.tensor([math.exp(-eps / 2 * sum(abs(z - (j == c)) for j, z in enumerate(noisy[0].tolist())))
                               for c in range(3)], dtype=torch.float64)
    assert torch.allclose(posterior(noisy, epsilon=eps)[0], likelihood / likelihood.sum())
    draws = laplace((200000,), scale=2 / eps, generator=torch.Generator().manual_seed(0))
    assert draws.var().item() == pytest.approx(2 * (2 / eps) ** 2, rel=0.02)


def _config(**changes) -> RunConfig:
    data = {"partition": {"labeled": 100, "aux": 40}, "model": {"hidden": 32, "out_dim": 16},
            "finetune": {"epochs": 3, "batch_size": 32}, "attack": {"name": "gc", "prior": "none"}}
    for key, value in changes.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    return RunConfig.model_validate(data)


def test_alibi_trains_on_its_posterior_rows_and_its_labels_are_their_argmax():
    p = plan(_config(defenses=[{"name": "alibi", "strength": 2.0, "sweep": True}]))
    fed = build_federation(p)
    active, known = fed.active, fed.active.labels >= 0
    assert active.soft_labels is not None
    assert torch.allclose(active.soft_labels[known].sum(1), torch.ones(int(known.sum())))
    assert torch.equal(active.soft_labels[known].argmax(1), active.labels[known])


@pytest.mark.parametrize("prior", ["model", "uniform"])
def test_alibi_s_update_is_the_reference_code_s_loss_under_its_prior_by_hand(prior):
    """label_dp_antipodes' Ohm loss: the target is the Laplace posterior of the noisy one-hot (drawn once), under the
    model's current softmax (mapwithprior, the default) or a uniform prior (map); the loss is the cross-entropy to it.
    The top's gradient after one exchange of the shared loop equals that loss's, computed here from the noise."""
    from vflpriv.methods.finetune import split_model, split_step

    eps = 2.0
    p = plan(_config(defenses=[{"name": "alibi", "strength": eps, "sweep": True, "options": {"prior": prior}}]))
    fed = build_federation(p)
    defense = p.defenses[0]
    bottoms, top = split_model(fed, p.method.fresh_bottoms(fed))
    batch = fed.labeled_aligned()[:16]
    split_step(fed, bottoms, top, batch, fed.active.labels[batch], epoch=0)
    got = top.linear.weight.grad.clone()
    logits = top([bottoms[q.index](q.x_train[batch]) for q in fed.parties])
    z = defense.noisy[batch].float()
    likelihood = -(z[:, None, :] - torch.eye(fed.num_classes)).abs().sum(-1) / (2 / eps)  # the reference's _map_laplace
    log_prior = torch.log(torch.softmax(logits.detach(), 1)) if prior == "model" else 0.0
    pmf = torch.softmax(likelihood + log_prior, 1)
    loss = (pmf * -torch.log(torch.softmax(logits, 1) + 1e-10)).sum(-1).mean()
    expected = torch.autograd.grad(loss, top.linear.weight)[0]
    assert torch.allclose(got, expected, atol=1e-5)
    assert not torch.isnan(defense.noisy[batch]).any() and defense.noisy[fed.active.labels < 0].isnan().all()


def test_alibi_s_model_prior_is_refused_beside_a_defense_that_mixes_the_batch_s_targets():
    mixup = {"name": "mixup", "strength": 0.7}
    with pytest.raises(IncompatibleError, match="prior=uniform"):
        plan(_config(defenses=[{"name": "alibi", "strength": 2.0, "sweep": True}, mixup]))
    plan(_config(defenses=[{"name": "alibi", "strength": 2.0, "sweep": True, "options": {"prior": "uniform"}}, mixup]))


def test_soft_labels_are_refused_for_a_method_whose_loop_takes_class_indices():
    with pytest.raises(IncompatibleError, match="soft labels"):
        plan(_config(method={"name": "ssvfl-i", "options": {"epochs": 1}}, attack={"name": "similarity"},
                     defenses=[{"name": "alibi", "strength": 2.0, "sweep": True}]))


@pytest.mark.parametrize("defense", [{"name": "alibi", "strength": 1.0},
                                     {"name": "label-dp", "strength": 1.0, "options": {"prior": "two-stage"}}])
def test_the_new_label_dp_mechanisms_claim_their_epsilon_and_the_canaries_never_exceed_it(defense, tmp_path,
                                                                                         monkeypatch):
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path))
    (record,) = run(_config(partition={"canaries": 60}, defenses=[{**defense, "sweep": True}]))
    assert record.status == "ok" and record.epsilon == 1.0
    assert record.epsilon_lower <= record.epsilon


def test_fedpass_draws_private_keys_once_per_party_at_its_scale_and_trains_its_layer():
    p = plan(_config(defenses=[{"name": "fedpass", "strength": 10.0, "sweep": True}]))
    fed = build_federation(p)
    defense = p.defenses[0]
    z = torch.randn(32, 400)
    out = defense.receive(1, z)
    layer = defense.layers[1]
    assert out.shape == z.shape and defense.receive(1, z).shape == z.shape and len(defense.layers) == 1
    assert layer.scale_key.shape == layer.bias_key.shape == (1, 400)  # one row: SecretFlow's and FATE's num_passport
    assert layer.scale_key.std().item() == pytest.approx(10.0, rel=0.15)
    assert layer.scale_key.mean().item() == pytest.approx(-1.0, abs=2.0)
    assert {id(q) for q in defense.active_parameters()} == {id(q) for q in layer.parameters()}
    assert all(not isinstance(b, nn.Parameter) for b in layer.buffers())  # the keys are not trained
    assert fed is not None


def test_potential_energy_by_hand_and_its_gradient_pushes_one_class_apart():
    h = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]], requires_grad=True)
    y = torch.tensor([0, 0, 1])
    energy = potential_energy(h, y, eps=0.0, normalize=True)
    assert energy.item() == pytest.approx(1 / math.sqrt(2))  # (2 ordered pairs at distance sqrt(2)) / 2 members
    energy.backward()
    moved = (h - 0.1 * h.grad).detach()
    assert torch.dist(*torch.nn.functional.normalize(moved[:2], dim=1)) > math.sqrt(2)
    assert potential_energy(h, torch.tensor([0, 1, 2]), eps=0.0, normalize=True) is None


def test_potential_energy_is_secretflow_s_sum_per_class_on_the_raw_embeddings():
    """SecretFlow's PELoss: per class, the sum over its ordered pairs of 1 / distance, over the class's count, summed
    over the classes; raw embeddings (a 3-4-5 triangle of class 0, two points 2 apart of class 1, a lone class 2)."""
    h = torch.tensor([[0.0, 0.0, 1.0], [3.0, 0.0, 1.0], [0.0, 4.0, 1.0], [10.0, 10.0, 0.0], [10.0, 12.0, 0.0],
                      [7.0, 7.0, 7.0]])
    y = torch.tensor([0, 0, 0, 1, 1, 2])
    by_hand = 2 * (1 / 3 + 1 / 4 + 1 / 5) / 3 + 2 * (1 / 2) / 2
    assert potential_energy(h, y, eps=0.0, normalize=False).item() == pytest.approx(by_hand)
    assert potential_energy(h[[0, 3, 1, 4, 2, 5]], y[[0, 3, 1, 4, 2, 5]], eps=0.0, normalize=False).item() == \
        pytest.approx(by_hand)  # the rows' order does not matter
    assert DEFENSES.get("peloss").Options().normalize is False  # the raw embeddings by default, as SecretFlow


def test_top_depth_deepens_the_linear_top_and_depth_one_is_the_mlp_top_bit_for_bit():
    deep = plan(_config(finetune={"top_depth": 2}))
    from vflpriv.methods.finetune import split_model

    fed = build_federation(deep)
    _, top = split_model(fed, deep.method.fresh_bottoms(fed))
    assert sum(isinstance(m, nn.Linear) for m in top.modules()) == 3
    (one,), (mlp,) = run(_config(finetune={"top_depth": 1})), run(_config(finetune={"top": "mlp"}))
    assert one.utility == mlp.utility and one.attack_accuracy == mlp.attack_accuracy
    with pytest.raises(IncompatibleError, match="mlp is top_depth 1"):
        plan(_config(finetune={"top": "mlp", "top_depth": 2}))
    with pytest.raises(IncompatibleError, match="trains its own classifier"):
        plan(_config(method={"name": "ssvfl-i", "options": {"epochs": 1}}, attack={"name": "similarity"},
                     finetune={"top_depth": 1}))
