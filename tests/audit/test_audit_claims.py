"""The audit's DP strengths claim what its canaries can test: dp-gaussian's noise solved for epsilon 4, 2, 1 at the
audited run's updates, label DP at 4, 2, 1, and the canaries raised where a claim needs more to be testable."""

from __future__ import annotations

import pytest

from vflpriv.common.canary_bound import canaries_needed, cap
from vflpriv.config.registry import ATTACKS, DEFENSES
from vflpriv.defenses.dp_gaussian import noise_for, spent
from vflpriv.workflows.audit import AUTO_SHARE, MAX_SHARE, AuditConfig, audit_grid, canaries, canaries_for_claims

SMALL = {"model": {"hidden": 32, "out_dim": 16}, "finetune": {"epochs": 3, "batch_size": 32},
         "partition": {"labeled": 120, "aux": 20}}


def test_dp_gaussian_s_audit_noise_spends_its_claims_over_the_audited_updates():
    cfg = AuditConfig.model_validate({**SMALL, "method": {"name": "splitnn"}, "seeds": [0],
                                      "finetune": {"epochs": 3, "local_updates": 2},
                                      "audit": {"attacks": ["gc"], "defenses": [{"name": "dp-gaussian"}]}})
    runs, _ = audit_grid(cfg)
    sigmas = sorted({r.swept.strength for r in runs if r.swept is not None})
    assert sigmas == sorted(noise_for(e, delta=1e-5, uses=6) for e in (4.0, 2.0, 1.0))
    for sigma, claim in zip(sigmas, (4.0, 2.0, 1.0)):
        assert 0.97 * claim <= spent(sigma, delta=1e-5, uses=6) <= claim
        assert DEFENSES.get("dp-gaussian").claimed_epsilon(sigma, finetune=cfg.finetune, options={})[0] == \
            spent(sigma, delta=1e-5, uses=6)


def test_on_digits_the_default_canaries_can_test_every_claim_of_the_default_dp_strengths():
    """Ten classes: 25 canaries a seed over 3 seeds cap the worst case of every registered label attack above 4 (the
    cap of the test the audit uses at the claim's delta)."""
    cfg = AuditConfig.model_validate({"method": {"name": "splitnn"}})
    attacks = sum(ATTACKS.get(n).secret == "labels" for n in ATTACKS.names())
    planted = canaries(cfg)
    for name in ("dp-gaussian", "label-dp", "alibi"):
        cls = DEFENSES.get(name)
        for s in cls.audit_strengths_for("finetune", finetune=cfg.finetune, options={}):
            claim, delta = cls.claimed_epsilon(s, finetune=cfg.finetune, options={})
            assert claim < cap(canaries=planted * 3, classes=10, attacks=attacks, delta=delta)
    assert planted == 200 // AUTO_SHARE and canaries_for_claims(cfg) <= planted


def test_a_binary_task_gets_more_canaries_where_its_claims_need_them_up_to_a_quarter_of_the_labels():
    base = {**SMALL, "dataset": {"name": "breast-cancer"}, "method": {"name": "splitnn"}, "seeds": [0, 1, 2],
            "partition": {"labeled": 88, "aux": 10, "aux_source": "labeled"}}
    cfg = AuditConfig.model_validate({**base, "audit": {"attacks": ["gc"], "defenses": [{"name": "label-dp",
                                                                                         "strengths": [2.0]}]}})
    needed = canaries_for_claims(cfg)
    assert cap(canaries=3 * needed, classes=2, attacks=1) > 2.0 >= cap(canaries=3 * (needed - 1), classes=2, attacks=1)
    assert needed > 88 // AUTO_SHARE and canaries(cfg) == min(needed, 88 // MAX_SHARE)
    runs, _ = audit_grid(cfg)
    assert {r.partition.canaries for r in runs if r.swept is not None} == {canaries(cfg)}
    told = AuditConfig.model_validate({**base, "audit": {**cfg.audit.model_dump(), "canaries": 5}})
    assert canaries(told) == 5  # as given: never raised
    none = AuditConfig.model_validate({**base, "audit": {"attacks": ["gc"], "defenses": [{"name": "iso"}]}})
    assert canaries_for_claims(none) == 0 and canaries(none) == 88 // AUTO_SHARE


def test_the_canaries_for_claims_are_sized_at_the_planned_label_attacks_share():
    """The claim test divides the level by the label attacks planned (a feature attack guesses no canary; the quick
    profile plans fewer): the canaries are sized at that share, not at every registered attack's."""
    base = {**SMALL, "dataset": {"name": "breast-cancer"}, "method": {"name": "splitnn"}, "seeds": [0, 1, 2],
            "partition": {"labeled": 88, "aux": 10, "aux_source": "labeled"}}
    claim = {"defenses": [{"name": "label-dp", "strengths": [2.0]}]}
    named = AuditConfig.model_validate({**base, "audit": {**claim, "attacks": ["gc", "grn"]}})
    assert canaries_for_claims(named) == -(-canaries_needed(2.0, classes=2, attacks=1) // 3)
    quick = {**base, "seeds": [0], "audit": {**claim, "profile": "quick"}}
    larger = AuditConfig.model_validate({**quick, "partition": {**base["partition"], "labeled": 200,
                                                                "aligned_fraction": 0.5}})
    needed = canaries_needed(2.0, classes=2, attacks=3)  # gc, mc-mixmatch, similarity
    assert canaries_for_claims(larger) == needed <= 200 // MAX_SHARE
    every = {**quick, "partition": {**larger.partition.model_dump(), "parties": 3}}  # two adversaries: each its own
    every["audit"] = {**every["audit"], "adversaries": "all"}  # variant (partition.adversary), tested at its own A
    assert canaries_for_claims(AuditConfig.model_validate(every)) == canaries_needed(2.0, classes=2, attacks=3)


def test_a_claim_the_largest_share_cannot_test_plants_no_canaries_for_it():
    """One seed of 88 labels: the quick profile's claim 2.0 needs 44 binary canaries, more than a quarter of the labels
    (22), so none are planted for it (the default share stays; the claim is untestable and the report says it needs
    44); planting the quarter bought no test of it, only labels spent."""
    base = {**SMALL, "dataset": {"name": "breast-cancer"}, "method": {"name": "splitnn"}, "seeds": [0],
            "partition": {"labeled": 88, "aux": 10, "aux_source": "labeled"}}
    cfg = AuditConfig.model_validate({**base, "audit": {"profile": "quick",
                                                        "defenses": [{"name": "label-dp", "strengths": [2.0]}]}})
    assert canaries_needed(2.0, classes=2, attacks=3) > 88 // MAX_SHARE
    assert canaries_for_claims(cfg) == 0 and canaries(cfg) == 88 // AUTO_SHARE
    both = AuditConfig.model_validate({**base, "audit": {"profile": "quick", "defenses": [
        {"name": "label-dp", "strengths": [2.0, 4.0]}, {"name": "label-dp", "strengths": [0.5]}]}})
    assert canaries_for_claims(both) == canaries_needed(0.5, classes=2, attacks=3)  # sized by the testable one only


@pytest.mark.parametrize("name", ["label-dp", "alibi"])
def test_label_dp_s_audit_strengths_are_below_the_default_cap(name):
    assert DEFENSES.get(name).audit_strengths["finetune"] == (4.0, 2.0, 1.0)
