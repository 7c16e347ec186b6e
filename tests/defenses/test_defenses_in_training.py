"""The defenses inside the active party's training, through the runner: each acts where it says and does what it
claims (MID's bottleneck trains with the active party, dCor decorrelates, CAE's autoencoder is trained once and
decodes, GradPerturb and Gaussian DP blunt gradient clustering, Gaussian DP reports its epsilon)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import vflpriv.defenses.cae as cae_module
from vflpriv.config.schema import RunConfig
from vflpriv.defenses.dcor import distance_correlation
from vflpriv.runner.execution import run, train
from vflpriv.runner.planning import plan

BASE = {"model": {"hidden": 64, "out_dim": 32}, "finetune": {"epochs": 4, "batch_size": 32},
        "attack": {"name": "gc", "prior": "none"}}
QUICK_CAE = {"samples": 5000, "epochs": 5}


def _config(defense: dict | None = None, **changes) -> RunConfig:
    data = {**BASE, **changes}
    if defense is not None:
        data["defenses"] = [{**defense, "sweep": True}]
    return RunConfig.model_validate(data)


def test_mid_bottleneck_is_trained_by_the_active_partys_optimiser():
    p = plan(_config({"name": "mid", "strength": 0.1}))
    result = train(p)
    mid = p.defenses[0]
    assert set(mid.bottlenecks) == {1}  # one bottleneck, over the passive party's embeddings
    from vflpriv.defenses.mid import Bottleneck
    from vflpriv.models.encoders import init_parameters

    fresh = init_parameters(Bottleneck(32, scale=1, decoder_scale=5, std_shift=0.5),
                            generator=torch.Generator().manual_seed(p.defenses[0].generator.initial_seed()))
    trained = mid.bottlenecks[1]
    assert not torch.equal(trained.encoder[0].weight, fresh.encoder[0].weight)  # it moved with the active party
    assert result.utility > 0.3


def test_dcor_lowers_the_distance_correlation_of_the_passive_embeddings_with_the_labels():
    def correlation(strength: float | None) -> float:
        p = plan(_config({"name": "dcor", "strength": strength} if strength else None,
                         finetune={"epochs": 8, "batch_size": 32}))
        result = train(p)
        passive = result.fed.parties[1]
        ids = result.fed.labeled_aligned()
        with torch.no_grad():
            h = result.trained.bottoms[1].eval()(passive.x_train[ids])
        y = F.one_hot(p.scenario.dataset.y_train[ids], 10).float()
        return distance_correlation(h, y).item()

    assert correlation(4.0) < correlation(None) - 0.05


def test_cae_trains_its_autoencoder_once_and_decodes_predictions(monkeypatch):
    """The full autoencoder (SecretFlow's budget) on a binary task, where it trains in seconds."""
    calls = []
    real = cae_module.train_autoencoder
    monkeypatch.setattr(cae_module, "train_autoencoder", lambda *a, **k: calls.append(1) or real(*a, **k))
    cancer = {"dataset": {"name": "breast-cancer"}, "finetune": {"epochs": 10, "batch_size": 32}}
    first, = run(_config({"name": "cae", "strength": 0.5}, **cancer))
    second, = run(_config({"name": "cae", "strength": 0.5}, seed=1, **cancer))
    assert len(calls) == 1  # one autoencoder per (classes, lambda, options): every run and seed shares it
    assert first.status == second.status == "ok"
    assert first.utility > 0.9  # AUC of the decoded predictions: they are the true classes again


def test_dcae_also_discretises_what_the_active_party_sends():
    cae, = run(_config({"name": "cae", "strength": 0.5, "options": QUICK_CAE}))
    dcae, = run(_config({"name": "dcae", "strength": 0.5, "options": {**QUICK_CAE, "bins": 2}}))
    assert cae.comm_mb == dcae.comm_mb  # the same messages, discretised
    assert cae.status == dcae.status == "ok" and cae.utility != dcae.utility


@pytest.mark.parametrize(("name", "strength"), [("grad-perturb", 0.05), ("dp-gaussian", 1.0),
                                              ("gaussian-message", 4.0)])
def test_gradient_noise_defenses_blunt_gradient_clustering(name, strength):
    plain, = run(_config())
    noised, = run(_config({"name": name, "strength": strength}))
    assert plain.attack_accuracy == 1.0 and noised.attack_accuracy < 0.6


def test_mixup_defends_through_the_active_batch_and_still_trains():
    record, = run(_config({"name": "mixup", "strength": 0.6}))
    plain, = run(_config())
    assert record.status == "ok" and record.utility > 0.3 and record.utility != plain.utility


def test_an_autoencoder_that_cannot_decode_its_labels_fails_the_run_instead_of_scoring_chance():
    record, = run(_config({"name": "cae", "strength": 0.5, "options": {"samples": 200, "epochs": 1}}))
    assert record.status == "failed" and "decodes" in record.error and "of its 10 classes" in record.error
