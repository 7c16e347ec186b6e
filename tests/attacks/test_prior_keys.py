"""The adversary's prior: one key per what it depends on (a same-attack prior per attack setting, a SimSiam or aux
prior shared by every attack of a training), which attacks can rerun alone, and a head that predicts one label per
target."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from vflpriv.config.schema import RunConfig
from vflpriv.runner.execution import run_safely
from vflpriv.runner.planning import plan
from vflpriv.runner.prior import prior_key, reads_only_the_encoder

VIEW = SimpleNamespace(target_ids={"train": torch.arange(5), "test": torch.arange(3)}, aux_ids=torch.arange(4))


def _prior(attack: dict, prior: str):
    p = plan([RunConfig.model_validate({"attack": {"prior": prior, **attack}})])
    return p.attacks[0].prior


def test_a_same_attack_prior_is_keyed_by_the_attack_s_settings():
    a = _prior({"name": "similarity", "options": {"metric": "cosine"}}, "same-attack")
    b = _prior({"name": "similarity", "options": {"metric": "euclidean"}}, "same-attack")
    assert prior_key(a, VIEW) != prior_key(b, VIEW)


@pytest.mark.parametrize("prior", ["simsiam", "aux"])
def test_a_head_prior_is_shared_by_every_attack_of_a_training(prior):
    keys = {prior_key(_prior({"name": name, "options": options}, prior), VIEW)
            for name, options in (("mc", {}), ("mc", {"epochs": 7}), ("gc", {}), ("similarity", {}))}
    assert len(keys) == 1


def test_a_prior_is_keyed_by_the_samples_it_trains_on_and_guesses():
    prior = _prior({"name": "mc"}, "simsiam")
    other = SimpleNamespace(target_ids={"train": torch.arange(1, 6), "test": torch.arange(3)}, aux_ids=torch.arange(4))
    assert prior_key(prior, VIEW) != prior_key(prior, other)


@pytest.mark.parametrize(("attack", "alone"), [
    ({"name": "mc"}, True), ({"name": "similarity"}, True), ({"name": "gc"}, False), ({"name": "bli"}, False),
    ({"name": "dli"}, False), ({"name": "similarity", "options": {"data": "gradient"}}, False),
    ({"name": "exploit"}, False), ({"name": "mc-mixmatch"}, True),
])
def test_only_an_attack_reading_the_encoder_alone_can_rerun_without_a_federation(attack, alone):
    from vflpriv.config.registry import ATTACKS

    cls = ATTACKS.get(attack["name"])
    built = cls(cls.Options.model_validate(attack.get("options", {})))
    assert reads_only_the_encoder(built, "finetune") is alone


@pytest.mark.parametrize("prior", ["aux", "simsiam"])
def test_a_head_prior_predicts_one_label_per_target_well_above_chance(prior):
    (record,) = run_safely([RunConfig.model_validate({
        "partition": {"labeled": 60, "aux": 80}, "finetune": {"epochs": 2},
        "attack": {"name": "mc", "prior": prior, "prior_epochs": 30}})])
    assert record.status == "ok", record.error
    assert record.prior_accuracy > 0.4 and len(record.prior_hits) == len(record.attack_hits)


def test_a_tuned_prior_is_keyed_by_its_search_budget_and_an_untuned_one_is_not():
    pytest.importorskip("optuna", reason="the search extra is not installed: budgets below mc's grid need Optuna")

    def key(tune: bool, budget: int) -> str:
        p = plan([RunConfig.model_validate({"attack": {"name": "mc", "prior": "simsiam", "tune": tune,
                                                       **({"search_budget": budget} if tune else {})}})])
        return prior_key(p.attacks[0].prior, VIEW)

    assert key(True, 4) != key(True, 8)
    assert key(False, 4) == key(False, 8)


def test_a_prior_that_needs_auxiliary_labels_is_refused_without_any_and_planned_with_one():
    from vflpriv.common.errors import IncompatibleError

    with pytest.raises(IncompatibleError, match="prior"):
        plan([RunConfig.model_validate({"partition": {"aux": 0}, "attack": {"name": "dli", "prior": "simsiam"},
                                        "finetune": {"top": "sum"}})])
    plan([RunConfig.model_validate({"partition": {"aux": 1}, "attack": {"name": "dli", "prior": "simsiam"},
                                     "finetune": {"top": "sum"}})])


def test_the_aux_prior_learns_its_encoder_from_the_auxiliary_labels(monkeypatch):
    """A_aux (Fu et al.'s baseline) trains a fresh bottom model end to end on the auxiliary labels: its encoder's
    weights move, unlike A_SimSiam's, which fits a head on a frozen self-supervised encoder."""
    import copy

    import vflpriv.runner.prior as prior
    from vflpriv.config.schema import PartitionConfig
    from vflpriv.data.embedded import load_digits
    from vflpriv.data.scenario import build_scenario
    from vflpriv.engine import Channel, Federation, Inbox, make_parties
    from vflpriv.runner.attacking import adversary_view

    digits = load_digits(parties=2)
    sc = build_scenario(digits, PartitionConfig(labeled=100, aux=40), seed=0)
    cfg = RunConfig.model_validate({"model": {"hidden": 32, "out_dim": 16}})
    fed = Federation(make_parties(sc, torch.device("cpu")), sc.aligned, Channel([], Inbox(owner=1)), 10, cfg.model,
                     cfg.finetune, torch.Generator(), torch.device("cpu"))
    view = adversary_view(fed, sc, None, "finetune", torch.Generator())
    built, original = [], prior.build_encoder

    def recorded(*args, **kwargs):
        encoder = original(*args, **kwargs)
        built.append((encoder, copy.deepcopy(encoder.state_dict())))
        return encoder

    monkeypatch.setattr(prior, "build_encoder", recorded)
    guesses = prior.aux_prior(view, attack=None, model=cfg.model, own_encoder=None, epochs=5,
                              generator=torch.Generator().manual_seed(0))
    (encoder, before), = built
    moved = [k for k, v in encoder.state_dict().items() if v.is_floating_point() and not torch.equal(v, before[k])]
    assert moved and guesses["train"].shape == view.target_ids["train"].shape
