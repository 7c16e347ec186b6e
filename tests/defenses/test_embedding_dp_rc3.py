"""Review rc3's findings on embedding-dp's claim (issue 47): each a configuration that printed a feature epsilon the
written argument does not cover, made small."""

from __future__ import annotations

import math
import sys
from pathlib import Path

from vflpriv.config.schema import RunConfig
from vflpriv.runner.execution import run

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_embedding_dp import _config  # noqa: E402


def test_a_victim_the_defense_does_not_guard_gets_no_feature_epsilon():
    """F7: embedding-dp guards party 1, the attack targets party 2, whose features no mechanism touched."""
    c = _config(sigma=4.0, epochs=1).model_dump(mode="json")
    c["partition"]["parties"], c["defenses"][0]["party"], c["attack"]["victim"] = 4, 1, 2
    (record,) = run([RunConfig.model_validate(c)])
    assert record.status == "ok", record.error
    assert math.isnan(record.epsilon_features) and math.isnan(record.epsilon_features_delta)
    assert "no feature epsilon at victim 2" in record.notes
