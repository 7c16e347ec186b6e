"""Review l6 L1: ``secrets`` is class data, so an embedding-dp subclass naming the labels recorded embedding-dp's
feature epsilon as a label epsilon. The secrets an epsilon is recorded under are those of the vflpriv-own class whose
``privacy_spent`` computes it, narrowed to the defense's (a plugin may narrow them, never redirect them), and a
plugin's ``guards`` (which victims the feature epsilon holds at) voids the claim."""

from __future__ import annotations

import math

from vflpriv.common import declarations
from vflpriv.config.registry import DEFENSES
from vflpriv.config.schema import RunConfig
from vflpriv.defenses.embedding_dp import EmbeddingDP
from vflpriv.defenses.label_dp import LabelDP
from vflpriv.defenses.passive import PassiveDefense
from vflpriv.runner.execution import run


class EdpLabels(EmbeddingDP):
    """embedding-dp with only its secrets renamed to the labels (data, no code)."""

    secrets = frozenset({"labels"})


class LdpBoth(LabelDP):
    """label-dp naming the features too: its epsilon is still label-dp's, over the labels."""

    secrets = frozenset({"labels", "features"})


class EdpGuardsAll(EmbeddingDP):
    """embedding-dp saying it guards every party while it acts at its configured party only (declared)."""

    reads_labels = reads_features = False

    def guards(self, party, phase):
        return True

    def acts_for(self, party, phase):
        return PassiveDefense.guards(self, party, phase) and not self.is_identity


class EdpCodeLabels(EmbeddingDP):
    """embedding-dp with undeclared code beside the features, naming the labels (review eps6 E1)."""

    secrets = frozenset({"labels"})

    def passive_bottom(self, party, bottom):
        return super().passive_bottom(party, bottom)


class EdpActsEverywhere(EmbeddingDP):
    """Declared; says it acts for every party (which decides the victims its feature epsilon guards: eps6 E3)."""

    reads_labels = reads_features = False

    def acts_for(self, party, phase):
        return not self.is_identity


for name, cls in {"t-edp-labels": EdpLabels, "t-ldp-both": LdpBoth, "t-edp-guards-all": EdpGuardsAll,
                  "t-edp-code-labels": EdpCodeLabels, "t-edp-acts-everywhere": EdpActsEverywhere}.items():
    DEFENSES.register(name, cls)

EDP = {"strength": 8.0, "party": 1, "sweep": True}


def _config(defense: dict, **changes) -> RunConfig:
    return RunConfig.model_validate({
        "partition": {"labeled": 100, "aux": 40}, "model": {"hidden": 32, "out_dim": 16},
        "finetune": {"epochs": 1, "batch_size": 32}, "attack": {"name": "gc", "prior": "none"}, "defenses": [defense],
        **changes})


def test_a_subclass_naming_other_secrets_does_not_redirect_embedding_dp_s_epsilon():
    note = ("t-edp-labels: no epsilon recorded: its secrets (labels) are none of those its accounting "
            "(EmbeddingDP.privacy_spent()) bounds (features)")
    for attack in ("gc", "fi-decoder"):
        (record,) = run(_config({"name": "t-edp-labels", **EDP}, attack={"name": attack, "prior": "none"}))
        assert record.status == "ok" and math.isnan(record.epsilon) and math.isnan(record.epsilon_features), attack
        assert note in record.notes


def test_secrets_naming_more_than_the_accounting_keep_its_own_secret_only():
    (record,) = run(_config({"name": "t-ldp-both", "strength": 1.0, "sweep": True}))
    assert record.epsilon == 1.0 and math.isnan(record.epsilon_features)


def test_a_plugin_s_guards_voids_the_feature_claim():
    (record,) = run(_config({"name": "t-edp-guards-all", **EDP}, partition={"labeled": 100, "aux": 40, "parties": 4},
                            attack={"name": "fi-decoder", "victim": 2, "prior": "none"}))
    assert record.victim == "2" and math.isnan(record.epsilon_features)
    assert "EdpGuardsAll.guards" in record.notes and "what vflpriv's own code does not" in record.notes


def test_a_claim_on_both_secrets_says_why_no_label_epsilon_is_recorded(monkeypatch):
    """Review l6 L7: the run's note said only that the feature epsilon does not apply to a label attack."""
    monkeypatch.setitem(declarations._DEFINED, LabelDP, declarations._DEFINED[LabelDP])  # restored after the test
    monkeypatch.setattr(LabelDP, "secrets", frozenset({"labels", "features"}))
    declarations.keep_defined(LabelDP)  # a vflpriv class claiming both, as its module defined it (not assigned since)
    (record,) = run(_config({"name": "label-dp", "strength": 1.0, "sweep": True}))
    assert math.isnan(record.epsilon) and math.isnan(record.epsilon_features)
    assert "label-dp: no label epsilon recorded: it claims the labels and the features with one epsilon" in record.notes


def test_undeclared_code_is_judged_against_the_secrets_the_accounting_bounds():
    """Review eps6 E1: checked against its own (label) secrets only, its undeclared feature code went unseen and the
    notes kept embedding-dp's per-release claim for the test rows."""
    (record,) = run(_config({"name": "t-edp-code-labels", **EDP}, attack={"name": "fi-decoder", "prior": "none"}))
    assert math.isnan(record.epsilon) and math.isnan(record.epsilon_features)
    assert "its own code (EdpCodeLabels.passive_bottom()) declares no feature reads" in record.notes
    assert "DP for that test sample" not in record.notes


def test_a_plugin_s_acts_for_voids_the_feature_claim():
    """Review eps6 E3: overriding acts_for alone recorded embedding-dp's feature epsilon at a victim it never acted
    on."""
    (record,) = run(_config({"name": "t-edp-acts-everywhere", **EDP}, attack={"name": "fi-decoder", "victim": 2,
                                                                                "prior": "none"},
                            partition={"labeled": 100, "aux": 40, "parties": 4}))
    assert math.isnan(record.epsilon_features) and "EdpActsEverywhere.acts_for" in record.notes
