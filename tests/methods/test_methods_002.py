"""One-shot and few-shot VFL (paper 002): the message pattern and its bytes, SDPA, Eq. 9, FixMatch-tab's
views, gc on the one gradient message, and determinism."""

from __future__ import annotations

import pytest
import torch
from pretrain_helpers import build_federation

from vflpriv.config.schema import RunConfig
from vflpriv.engine import EMBEDDING, FINETUNE, GRADIENT, INFERENCE, PROBABILITIES
from vflpriv.methods.oneshot import pseudo_label_probability, sdpa
from vflpriv.models.ssl.fixmatch import TabularViews
from vflpriv.runner.execution import execute, run
from vflpriv.runner.planning import plan
from vflpriv.runner.scoring import hungarian_accuracy

FAST = {"client_epochs": 1, "server_epochs": 2}


def config(method: str, *, parties: int = 2, seed: int = 0, attack: dict | None = None, **changes) -> RunConfig:
    return RunConfig.model_validate({
        "partition": {"parties": parties, "labeled": 100, "aux": 40},
        "model": {"hidden": 64, "out_dim": 32},
        "method": {"name": method, "options": {**FAST, **changes.pop("options", {})}},
        "attack": attack or {"name": "mc", "options": {"epochs": 5}, "prior": "none"},
        "seed": seed, **changes,
    })


@pytest.mark.parametrize("parties", [2, 4])
@pytest.mark.parametrize("method", ["oneshot", "fewshot"])
def test_message_counts_and_bytes_follow_the_papers_table_1(method, parties):
    p, fed = build_federation(config(method, parties=parties))
    trained = p.method.finetune(fed, None)
    p.method.predict(fed, trained)
    meter = fed.channel.meter
    passive = parties - 1
    n_o, d = fed.labeled_aligned().numel(), 32
    n_test = fed.active.x_test.shape[0]
    unaligned = {q.index: int((~torch.isin(q.local_ids, fed.labeled_aligned())).sum()) for q in fed.passive}
    expected = {(FINETUNE, "up", EMBEDDING): 2 * passive, (FINETUNE, "down", GRADIENT): passive,
                (INFERENCE, "up", EMBEDDING): passive}
    expected_bytes = {(FINETUNE, "up", EMBEDDING): 2 * passive * n_o * d * 4, (FINETUNE, "down", GRADIENT): passive * n_o * d * 4,
                      (INFERENCE, "up", EMBEDDING): passive * n_test * d * 4}
    if method == "fewshot":  # + (H_o and H_u) up, probabilities down, H_o up: 5 per passive party
        expected[(FINETUNE, "up", EMBEDDING)] = 3 * passive
        expected[(FINETUNE, "down", PROBABILITIES)] = passive
        expected_bytes[(FINETUNE, "up", EMBEDDING)] = (3 * passive * n_o + sum(unaligned.values())) * d * 4
        expected_bytes[(FINETUNE, "down", PROBABILITIES)] = sum(unaligned.values()) * 4
    assert dict(meter.messages) == expected
    assert dict(meter.bytes) == expected_bytes
    assert sum(v for k, v in meter.messages.items() if k[0] == FINETUNE) == passive * (5 if method == "fewshot" else 3)


def test_sdpa_rows_are_convex_combinations_of_the_aligned_representations():
    g = torch.Generator().manual_seed(0)
    h_u, h_o = torch.randn(7, 5, generator=g), torch.randn(4, 5, generator=g)
    weights = sdpa(h_u, h_o, torch.eye(4))  # the other party's rows as unit vectors: the output is the weights
    assert weights.shape == (7, 4) and (weights >= 0).all()
    assert torch.allclose(weights.sum(1), torch.ones(7))
    other = torch.randn(4, 3, generator=g)
    assert torch.allclose(sdpa(h_u, h_o, other), weights @ other)
    assert torch.allclose(weights, torch.softmax(h_u @ h_o.T / 5**0.5, dim=1))


def test_eq_9_is_zero_unless_both_predictions_agree_above_the_threshold():
    local = torch.tensor([[0.96, 0.04], [0.97, 0.03], [0.50, 0.50], [0.02, 0.98]])
    joint = torch.tensor([[0.99, 0.01], [0.01, 0.99], [0.99, 0.01], [0.10, 0.90]])
    prob = pseudo_label_probability(local, joint, threshold=0.95)
    assert prob.tolist() == pytest.approx([0.99, 0.0, 0.0, 0.0])  # agree & confident; disagree; local unsure; joint unsure


def test_fixmatch_tab_views_follow_eq_5_and_6():
    x = torch.randn(20000, 8) * 3 + 1
    mean = x.mean(0, keepdim=True)
    views = TabularViews(mean, 0, mask_rate=0.2, sigma=0.1)
    weak, strong = views(x, torch.Generator().manual_seed(0))
    masked = weak != x
    assert masked.float().mean().item() == pytest.approx(0.2, abs=0.01)
    assert torch.allclose(weak[masked], mean.expand_as(x)[masked])
    noise = strong - weak
    assert noise.std().item() == pytest.approx(0.1, rel=0.02) and abs(noise.mean().item()) < 0.003
    cats = TabularViews(torch.zeros(1, 3), 2, mask_rate=1.0, sigma=1.0)(torch.ones(5, 3), torch.Generator().manual_seed(1))
    assert (cats[0][:, :2] == 0).all() and (cats[1][:, :2] == 0).all()  # categorical: "unknown", no noise


@pytest.mark.parametrize("strength", [0.0, 5.0])
def test_gc_on_the_one_gradient_message_is_the_temporary_labelling_the_method_gets(strength, monkeypatch):
    """The paper's step (3) is the gradient clustering attack. The adversary's inbox holds exactly the gradients
    the party clustered: k-means on them with the party's own seed reproduces its temporary labels. gc, with its
    own k-means restarts on that message, scores what the temporary labels score on clean gradients (both
    exact); under noise the two restarts may settle in different local optima."""
    import vflpriv.attacks.labels.gradient_clustering as gc_module
    from vflpriv.common.seeding import generator
    from vflpriv.models.kmeans import kmeans

    cfg = config("oneshot", attack={"name": "gc", "options": {"normalize": False}, "prior": "none"},
                 defenses=[{"name": "iso", "strength": strength, "sweep": True}])
    seen = []
    real = gc_module.kmeans
    monkeypatch.setattr(gc_module, "kmeans", lambda x, **k: seen.append(x) or real(x, **k))
    p = plan(cfg)
    (record,) = execute(p)
    own = p.method.temporary_labels[1]
    method_seed = generator(cfg.seed, "method").initial_seed()  # the method derives its streams from it
    again = kmeans(seen[0], k=10, n_init=10, generator=generator(method_seed, "client:1:kmeans")).labels
    assert torch.equal(again, own)
    truth = p.scenario.dataset.y_train[p.scenario.labeled]
    if strength == 0.0:
        assert record.attack_accuracy_hungarian == hungarian_accuracy(own, truth) > 0.9
    else:
        assert record.attack_accuracy_hungarian == pytest.approx(hungarian_accuracy(own, truth), abs=0.06)


def test_defenses_act_on_the_one_gradient_message_and_label_dp_on_the_labels():
    accuracies = {}
    for name, strength in (("iso", 0.0), ("iso", 25.0), ("max-norm", 1.0), ("sparsify", 99.0), ("label-dp", 0.5)):
        cfg = config("oneshot", attack={"name": "gc", "prior": "none"},
                     defenses=[{"name": name, "strength": strength, "sweep": True}])
        assert {d.kinds for d in plan(cfg).defenses} == {frozenset({"labels" if name == "label-dp" else GRADIENT})}
        accuracies[(name, strength)] = run(cfg)[0].attack_accuracy
    assert accuracies[("iso", 25.0)] < accuracies[("iso", 0.0)]
    assert accuracies[("label-dp", 0.5)] < accuracies[("iso", 0.0)]


@pytest.mark.parametrize("method", ["oneshot", "fewshot"])
def test_same_seed_same_numbers(method):
    (a,), (b,), (c,) = run(config(method)), run(config(method)), run(config(method, seed=1))
    assert (a.utility, a.attack_accuracy, a.comm_mb) == (b.utility, b.attack_accuracy, b.comm_mb)
    assert (a.utility, a.attack_accuracy) != (c.utility, c.attack_accuracy)


@pytest.mark.parametrize("method", ["oneshot", "fewshot"])
def test_a_feature_less_server_lets_no_extractor_see_a_true_label(method):
    """M3: with the paper's feature-less server, party 0's extractor trains on the k-means clusters of its own gradient
    (like every client), not on the true labels; the messages are those of the label-holder variant."""
    from vflpriv.common.seeding import generator
    from vflpriv.models.kmeans import kmeans

    counts = {}
    for server in ("label-holder", "feature-less"):
        p, fed = build_federation(config(method, options={"server": server}))
        p.method.predict(fed, p.method.finetune(fed, None))
        counts[server] = dict(fed.channel.meter.messages)
        y = fed.active.labels[fed.labeled_aligned()]
        own = p.method.temporary_labels[0]
        if server == "label-holder":
            assert torch.equal(own, y)
            continue
        assert not torch.equal(own, y) and hungarian_accuracy(own, y) > 0.8  # clusters, named arbitrarily
        assert own.max() < fed.num_classes and own.unique().numel() <= fed.num_classes
        seed = generator(0, "method").initial_seed()
        assert torch.equal(own, kmeans(_own_gradient(p, fed), k=fed.num_classes, n_init=10,
                                       generator=generator(seed, "client:0:kmeans")).labels)
    assert counts["label-holder"] == counts["feature-less"]


def _own_gradient(p, fed) -> torch.Tensor:
    """Party 0's gradient of its own H_o through the untrained classifier, recomputed as the method does."""
    from vflpriv.common.seeding import generator
    from vflpriv.methods.finetune import new_top
    from vflpriv.models.encoders import init_parameters

    method, seed = p.method, fed.generator.initial_seed()
    models = [method._local_model(fed, q.index, seed) for q in fed.parties]
    ids = fed.labeled_aligned()
    top = init_parameters(new_top(fed, [m.extractor for m in models]), generator=generator(seed, "server:init"))
    with torch.no_grad():
        reps = [m.eval().extractor(q.x_train[ids]) for m, q in zip(models, fed.parties)]
    held = [h.clone().requires_grad_() for h in reps]
    torch.nn.functional.cross_entropy(top(held), fed.active.labels[ids]).backward()
    return held[0].grad
