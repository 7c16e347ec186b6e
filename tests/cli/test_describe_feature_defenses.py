"""``vflpriv describe`` says of a defense what secret it claims, where it acts, its default strengths and what it costs,
and of a method where it uses a passive party's features outside the shared loop (what voids embedding-dp's claim)."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from vflpriv.cli import app


def _facts(name: str) -> dict[str, str]:
    result = CliRunner().invoke(app, ["describe", name], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    return dict(m.groups() for m in re.finditer(r"^  ([^:\n]+): (.*)$", result.output, re.M))


@pytest.mark.parametrize(("name", "phases", "strengths"), [
    ("nopeek", "finetune and pretrain", "finetune: 0.5, 2, 8; pretrain: 0.5, 2, 8"),
    ("mid-sender", "finetune (", "finetune: 0.01, 0.1, 1"),
    ("fi-adversarial", "finetune and pretrain", "finetune: 1, 3, 10"),
    ("embedding-dp", "finetune (", "finetune: 0.02, 0.1, 0.5"),
])
def test_a_feature_defense_says_what_it_claims_where_it_acts_its_strengths_and_its_cost(name, phases, strengths):
    facts = _facts(name)
    assert facts["claims to protect"] == "features"
    assert facts["phases"].startswith(phases)
    assert facts["audit strengths"].startswith(strengths)
    assert facts["protects"].startswith("no message in transit") and "passive" in facts["acts at"]
    assert facts["extra cost per update"] and facts["when it pays"]


def test_a_label_defense_claims_the_labels_and_says_its_embedding_configuration():
    facts = _facts("gaussian-message")
    assert facts["claims to protect"] == "labels"
    assert facts["audit strengths on embeddings"].startswith("finetune: ")
    assert "phases" not in facts


def test_a_method_says_where_it_uses_a_passive_party_s_features_outside_the_shared_loop():
    key = "feature uses outside the shared loop (default options)"
    assert _facts("splitnn")[key] == "none"
    assert "pretraining trains each party's encoder" in _facts("local-simsiam")[key]
    fedhssl = _facts("fedhssl")[key]
    assert "sends projections of its features in pretraining" in fedhssl
    assert "SCARF" in _facts("vflhlp")[key] and _facts("vflhlp-a")[key] == "none"


def test_a_plugin_method_with_its_own_finetune_says_what_it_does_not_declare_and_what_follows(monkeypatch):
    """Its own finetune without label_uses/feature_uses beside it read "none" here, while dp-gaussian and embedding-dp
    took its uses as unknown and withheld their epsilons."""
    import sys
    import types

    from vflpriv.methods.splitnn import SplitNN

    class Peek(SplitNN):
        """A split network with a finetune of its own."""

        def finetune(self, fed, pretrained):
            return super().finetune(fed, pretrained)

    class Declared(Peek):
        def label_uses(self):
            return ()

        def feature_uses(self):
            return ()

    module = types.ModuleType("peek_plugin")
    module.Peek, module.Declared = Peek, Declared
    monkeypatch.setitem(sys.modules, "peek_plugin", module)
    peek, declared = _facts("peek_plugin:Peek"), _facts("peek_plugin:Declared")
    label, feature = peek["label uses it does not declare"], peek["feature uses it does not declare"]
    assert "its own code (Peek.finetune())" in label and label.endswith("dp-gaussian records no epsilon for it")
    assert "its own code (Peek.finetune())" in feature and "embedding-dp records no training epsilon" in feature
    assert "label uses it does not declare" not in declared and "feature uses it does not declare" not in declared
    assert "label uses it does not declare" not in _facts("splitnn")
