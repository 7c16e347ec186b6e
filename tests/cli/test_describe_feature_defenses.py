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
