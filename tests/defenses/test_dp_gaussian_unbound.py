"""dp-gaussian before it is bound to a training (no label use counted yet) claims no epsilon, at any sigma: a
training that never reached the defense spent nothing, and the claim is absent rather than a crash."""

from __future__ import annotations

import pytest
import torch

from vflpriv.config.registry import DEFENSES


def _defense(sigma: float, **options):
    cls = DEFENSES.get("dp-gaussian")
    return cls(strength=sigma, party=0, phase="finetune", kinds=None, options=cls.Options.model_validate(options),
               generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("sigma, options", [(0.0, {}), (0.5, {}), (4.0, {"clip": 2.0}), (0.0, {"target_epsilon": 1})])
def test_an_unbound_defense_claims_no_epsilon(sigma, options):
    defense = _defense(sigma, **options)
    assert defense.uses is None and defense.privacy_spent() is None


def test_a_bound_defense_that_read_no_label_claims_none_and_one_that_did_claims_one():
    defense = _defense(0.5)
    defense.num_classes, defense.uses = 3, torch.zeros(4, dtype=torch.long)
    assert defense.privacy_spent() is None
    defense.uses[1] += 1
    assert defense.privacy_spent() > 0
