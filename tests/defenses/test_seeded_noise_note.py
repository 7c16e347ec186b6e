"""Review fe F3: every recorded epsilon states that it assumes the adversary does not know the mechanism's generator
state (vflpriv seeds the noise from the run's seed, which every record holds); a run without a claim says nothing."""

from __future__ import annotations

import math

from vflpriv.defenses.noise import SECURE_NOISE, SEEDED_NOISE
from vflpriv.runner.execution import run

FAST = {"model": {"hidden": 16, "out_dim": 8}, "finetune": {"epochs": 1, "batch_size": 64},
        "attack": {"name": "mc", "prior": "none", "options": {"epochs": 1}}}


def test_a_recorded_epsilon_states_the_secret_generator_assumption(tiny):
    (claimed,) = run(tiny(defenses=[{"name": "label-dp", "strength": 2.0}], **FAST))
    assert claimed.epsilon == 2.0 and f"label-dp: {SEEDED_NOISE}" in claimed.notes
    (unclaimed,) = run(tiny(defenses=[{"name": "iso", "strength": 1.0}], **FAST))
    assert math.isnan(unclaimed.epsilon) and SEEDED_NOISE not in unclaimed.notes


def test_a_withheld_training_epsilon_still_notes_the_noise_of_a_test_row_claim_and_of_secure_noise(tiny):
    """Review fe2 R2: on breast-cancer (standardised: no training epsilon) embedding-dp still states a test-row claim,
    which rests on the same noise; and a secure-noise run says it is not reproducible though it records no epsilon."""
    data = {"dataset": {"name": "breast-cancer"}, "partition": {"labeled": 80, "aux": 20},
            "model": {"hidden": 16, "out_dim": 8}, "finetune": {"epochs": 1, "batch_size": 64},
            "attack": {"name": "fi-decoder", "prior": "none", "options": {"epochs": 1}}}
    for options, note in (({}, SEEDED_NOISE), ({"secure_noise": True}, SECURE_NOISE)):
        (record,) = run(tiny(defenses=[{"name": "embedding-dp", "strength": 1.0, "options": options}], **data))
        assert math.isnan(record.epsilon_features) and "-DP for that test sample's features" in record.notes
        assert f"embedding-dp: {note}" in record.notes
