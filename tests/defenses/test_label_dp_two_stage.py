"""RR-with-prior's choice of k and its draws on priors in any order, and LP-2ST's two stages as its reference code
(google-research/label-dp) runs them: each labeled sample (class 0 included) randomised exactly once, the first stage's
share and the prior's temperature per epsilon, the prior learnt on the first stage only, and the first stage's labels
outside the prior's top k dropped."""

from __future__ import annotations

import math

import pytest
import torch

import vflpriv.defenses.label_dp as label_dp
from vflpriv.config.schema import RunConfig
from vflpriv.defenses.label_dp import rr_with_prior, top_k_choice
from vflpriv.runner.planning import plan


@pytest.mark.parametrize("eps", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("classes", [3, 10])
def test_a_uniform_prior_keeps_every_class_whatever_epsilon(eps, classes):
    """Under a uniform prior, P[right] = k/C * e^eps / (e^eps + k - 1) grows with k: k* = C, plain RR."""
    assert int(top_k_choice(torch.full((1, classes), 1 / classes), epsilon=eps)) == classes


def test_k_is_chosen_on_the_prior_s_sorted_mass_whatever_the_order_of_its_classes():
    prior = torch.tensor([0.04, 0.3, 0.06, 0.5, 0.1])
    rows = torch.stack([prior[torch.randperm(5, generator=torch.Generator().manual_seed(s))] for s in range(6)])
    for eps in (0.5, 1.0, 3.0):
        expected = top_k_choice(prior.sort(descending=True).values[None], epsilon=eps)
        assert torch.equal(top_k_choice(rows, epsilon=eps), expected.expand(6))


def test_with_a_uniform_prior_rr_with_prior_draws_as_plain_randomised_response_to_every_class():
    eps, classes, n = 1.0, 4, 200000
    out = rr_with_prior(torch.zeros(n, dtype=torch.long), torch.full((n, classes), 0.25), epsilon=eps,
                        generator=torch.Generator().manual_seed(0))
    freq = torch.bincount(out, minlength=classes).double() / n
    keep = math.exp(eps) / (math.exp(eps) + classes - 1)
    expected = torch.tensor([keep] + [(1 - keep) / (classes - 1)] * (classes - 1), dtype=torch.float64)
    assert torch.allclose(freq, expected, atol=4e-3)  # the last-ranked class included


def _two_stage(monkeypatch, eps: float = 1.0, **options):
    """Bind LP-2ST on a digits federation, capturing what the first stage trains on, its classifier's logits and the
    prior it hands on."""
    seen = {"logits": []}
    fit, rr, apply = label_dp.fit_classifier, label_dp.rr_with_prior, label_dp.apply_in_batches

    def fit_spy(model, x, y, **kwargs):
        seen["fit_x"], seen["fit_y"], seen["fit_kwargs"] = x, y, kwargs
        return fit(model, x, y, **kwargs)

    def rr_spy(labels, prior, **kwargs):
        seen["rr_labels"], seen["prior"] = labels, prior
        return rr(labels, prior, **kwargs)

    def apply_spy(model, x, **kwargs):
        out = apply(model, x, **kwargs)
        seen["logits"].append(out)
        return out

    monkeypatch.setattr(label_dp, "fit_classifier", fit_spy)
    monkeypatch.setattr(label_dp, "rr_with_prior", rr_spy)
    monkeypatch.setattr(label_dp, "apply_in_batches", apply_spy)
    cfg = RunConfig.model_validate({"partition": {"labeled": 200}, "defenses": [
        {"name": "label-dp", "strength": eps, "options": {"prior": "two-stage", "prior_epochs": 1} | options}]})
    p = plan([cfg])
    from vflpriv.runner.execution import build_federation

    before = build_federation(p, transforms=[]).active.labels.clone()  # the same parties, no defense bound
    fed = build_federation(p)
    seen["label_ids"] = fed.active.label_ids
    return seen, before, fed.active.labels


@pytest.mark.parametrize(("eps", "share", "temperature"), [(0.5, 0.8, 0.6), (1.0, 0.8, 0.6), (1.5, 0.8, 0.6),
                                                            (2.0, 0.7, 0.5), (4.0, 0.6, 0.5), (8.0, 0.6, 0.5)])
def test_the_stages_follow_the_reference_code_s_settings_per_epsilon(eps, share, temperature):
    """profiles/p100_cifar10.py: data_split 80, 70, 60, 60 and temperature 0.6, 0.5, 0.5, 0.5 at eps 1, 2, 4, 8."""
    assert label_dp.stage_settings(eps) == (share, temperature)


def test_the_first_stage_takes_its_share_and_the_prior_is_its_classifier_tempered_row_by_row(monkeypatch):
    seen, before, _ = _two_stage(monkeypatch, filter_first=False)
    labeled = int((before >= 0).sum())
    assert seen["fit_y"].numel() == round(0.8 * labeled) and seen["rr_labels"].numel() == labeled - round(0.8 * labeled)
    (logits,) = seen["logits"]  # the classifier on the second stage's features
    assert torch.allclose(seen["prior"], (logits / 0.6).softmax(1).cpu())
    assert seen["fit_kwargs"] == {"epochs": 1, "lr": 1e-3, "weight_decay": 1e-5, "batch_size": 64,
                                  "generator": seen["fit_kwargs"]["generator"], "what": "RR-with-prior's first stage"}
    seen, before, _ = _two_stage(monkeypatch, filter_first=False, first_share=0.5, temperature=1.0)
    assert seen["fit_y"].numel() == labeled // 2 and torch.allclose(seen["prior"], seen["logits"][0].softmax(1).cpu())


def test_the_first_stage_s_labels_outside_the_prior_s_top_k_are_dropped(monkeypatch):
    """train.py's filter_stage_data_by_prior: k = the second stage's mean k*, rounded down; a first-stage label outside
    the classifier's top k of its own row is dropped from the active party's labeled set, the others are kept."""
    seen, before, after = _two_stage(monkeypatch, eps=2.0, prior_epochs=30)
    second, first_logits = seen["logits"]
    k = int(top_k_choice((second / 0.5).softmax(1).cpu(), epsilon=2.0).double().mean())
    assert 1 <= k < 10
    outside = ~(first_logits.topk(k, dim=1).indices == seen["fit_y"][:, None]).any(1)
    dropped = ((before >= 0) & (after == -1)).nonzero().flatten()
    assert 0 < dropped.numel() == int(outside.sum())
    labeled = (before >= 0).nonzero().flatten()
    assert torch.equal(seen["label_ids"].sort().values, labeled[~torch.isin(labeled, dropped)])


def test_every_labeled_sample_class_0_included_is_randomised_once_and_unlabeled_ones_stay(monkeypatch):
    relabelled = []
    plain = label_dp.LabelDP.relabel

    def relabel_spy(self, labels, **kwargs):
        relabelled.append(labels)
        return plain(self, labels, **kwargs)

    monkeypatch.setattr(label_dp.LabelDP, "relabel", relabel_spy)
    seen, before, after = _two_stage(monkeypatch)
    labeled = before >= 0
    assert torch.equal(after[~labeled], before[~labeled])
    (first,) = relabelled
    randomised = torch.cat([first.cpu(), seen["rr_labels"].cpu()])  # the labels each stage drew from, once each
    assert torch.equal(torch.bincount(randomised, minlength=10), torch.bincount(before[labeled], minlength=10))


@pytest.mark.parametrize("classes", [2, 10])
def test_an_infinite_epsilon_keeps_every_label(classes):
    from vflpriv.defenses.label_dp import keep_probability

    assert keep_probability(epsilon=math.inf, num_classes=classes) == 1.0
    assert keep_probability(epsilon=700.0, num_classes=classes) == pytest.approx(1.0)
