"""Review rc3's findings on embedding-dp's claim (issue 47): each a configuration that printed a feature epsilon the
written argument does not cover, made small."""

from __future__ import annotations

import math
import sys
from pathlib import Path

from vflpriv.config.schema import RunConfig
from vflpriv.engine import ACTIVE, EMBEDDING, FINETUNE, Message
from vflpriv.runner.execution import run

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "methods"))
from pretrain_helpers import build_federation  # noqa: E402
from test_embedding_dp import _config  # noqa: E402


def test_a_victim_the_defense_does_not_guard_gets_no_feature_epsilon():
    """F7: embedding-dp guards party 1, the attack targets party 2, whose features no mechanism touched."""
    c = _config(sigma=4.0, epochs=1).model_dump(mode="json")
    c["partition"]["parties"], c["defenses"][0]["party"], c["attack"]["victim"] = 4, 1, 2
    (record,) = run([RunConfig.model_validate(c)])
    assert record.status == "ok", record.error
    assert math.isnan(record.epsilon_features) and math.isnan(record.epsilon_features_delta)
    assert "no feature epsilon at victim 2" in record.notes


def test_a_finetuning_release_without_sample_ids_voids_the_training_epsilon():
    """F8: a victim's finetuning embedding without ids was dropped from the counts; now it fails closed."""
    p, fed = build_federation(_config(sigma=4.0, epochs=1))
    dp = p.defenses[0]
    p.method.finetune(fed, None)
    assert dp.privacy_spent() is not None
    x = fed.parties[1].x_train[:5].flatten(1)
    fed.channel.send(Message(EMBEDDING, FINETUNE, 1, ACTIVE, x, None, 9))
    assert dp.privacy_spent() is None and "without sample ids" in dp.uncovered
