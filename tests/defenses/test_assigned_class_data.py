"""Review eps6 E4: ``secrets`` (and every other member a claim reads) is class data, which ownership did not judge: a
plugin module's ``EmbeddingDP.secrets = frozenset({"labels"})`` at import turned the built-in's feature epsilon into a
label epsilon. A member of a vflpriv class assigned since its module defined it voids the claim, with a note."""

from __future__ import annotations

import math

import pytest
import torch

from vflpriv.common.declarations import vflpriv_own
from vflpriv.config.registry import METHODS
from vflpriv.config.schema import RunConfig
from vflpriv.defenses.base import Protection, StrengthAxis
from vflpriv.defenses.dp_gaussian import GaussianDP
from vflpriv.defenses.embedding_dp import EmbeddingDP
from vflpriv.defenses.label_dp import LabelDP
from vflpriv.defenses.passive import PassiveDefense
from vflpriv.runner.claims import foreign_accounting
from vflpriv.runner.execution import run


def test_a_plugin_relabelling_embedding_dp_s_secrets_leaves_the_built_in_no_epsilon(monkeypatch):
    monkeypatch.setattr(EmbeddingDP, "secrets", frozenset({"labels"}))  # what a plugin module did at import
    (record,) = run(RunConfig.model_validate({
        "partition": {"labeled": 100, "aux": 40}, "model": {"hidden": 32, "out_dim": 16},
        "finetune": {"epochs": 1, "batch_size": 32}, "attack": {"name": "gc", "prior": "none"},
        "defenses": [{"name": "embedding-dp", "strength": 8.0, "party": 1, "sweep": True}]}))
    assert record.status == "ok" and math.isnan(record.epsilon) and math.isnan(record.epsilon_features)
    assert ("its class holds what vflpriv's own code does not (EmbeddingDP.secrets (assigned since vflpriv defined "
            "it))") in record.notes


NEGATIVE = StrengthAxis(name="epsilon", stronger="lower", identity=math.inf, low=-10.0, search=(0.05, 20.0))


@pytest.mark.parametrize(("owner", "name", "value", "defense"), [
    (LabelDP, "secrets", frozenset({"features"}), LabelDP),  # added: label-dp's epsilon as a feature epsilon
    (Protection, "secrets", frozenset({"features"}), GaussianDP),  # a base's, read by every subclass
    (LabelDP, "axis", NEGATIVE, LabelDP),  # the strength's bounds
    (EmbeddingDP, "releases", torch.zeros(()), EmbeddingDP),  # a property made data: no release counted
    (PassiveDefense, "phases", ("finetune", "pretrain"), EmbeddingDP),
])
def test_each_assigned_member_voids_the_claim(monkeypatch, owner, name, value, defense):
    instance = defense.__new__(defense)
    assert foreign_accounting(instance, "d") == "" and vflpriv_own(owner)
    monkeypatch.setattr(owner, name, value, raising=False)
    assert (f"d: its class holds what vflpriv's own code does not ({owner.__name__}.{name} (assigned since vflpriv "
            "defined it))") in foreign_accounting(
        instance, "d")
    assert not vflpriv_own(owner)  # its code mark keys the run apart from the built-in's
    monkeypatch.undo()
    assert foreign_accounting(instance, "d") == "" and vflpriv_own(owner)


def test_a_method_s_assigned_declaration_is_a_label_use(monkeypatch):
    """An assigned ``label_uses`` of a built-in method (reading no labels in pretraining) let dp-gaussian record an
    epsilon its mechanism does not bound."""
    cls = METHODS.get("vflhlp")
    assert cls(cls.Options()).undeclared_label_uses() == ()
    monkeypatch.setattr(cls, "label_uses", lambda self: ())
    method = cls(cls.Options())
    assert method.label_uses() == () and "VFLHLP.label_uses (assigned since" in method.undeclared_label_uses()[0]
    assert GaussianDP.covers(None, method)
