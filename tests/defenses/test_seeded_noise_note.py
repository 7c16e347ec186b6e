"""Review fe F3: every recorded epsilon states that it assumes the adversary does not know the mechanism's generator
state (vflpriv seeds the noise from the run's seed, which every record holds); a run without a claim says nothing."""

from __future__ import annotations

import math

from vflpriv.defenses.noise import SEEDED_NOISE
from vflpriv.runner.execution import run

FAST = {"model": {"hidden": 16, "out_dim": 8}, "finetune": {"epochs": 1, "batch_size": 64},
        "attack": {"name": "mc", "prior": "none", "options": {"epochs": 1}}}


def test_a_recorded_epsilon_states_the_secret_generator_assumption(tiny):
    (claimed,) = run(tiny(defenses=[{"name": "label-dp", "strength": 2.0}], **FAST))
    assert claimed.epsilon == 2.0 and f"label-dp: {SEEDED_NOISE}" in claimed.notes
    (unclaimed,) = run(tiny(defenses=[{"name": "iso", "strength": 1.0}], **FAST))
    assert math.isnan(unclaimed.epsilon) and SEEDED_NOISE not in unclaimed.notes
