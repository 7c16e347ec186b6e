"""Review fe F3's option: ``options.secure_noise`` draws a DP defense's noise from a generator seeded from OS entropy,
not from the run's seed, and its record says that the run is not reproducible; off, the stream is the seed's."""

from __future__ import annotations

from vflpriv.common.seeding import generator
from vflpriv.defenses.noise import SECURE_NOISE, SEEDED_NOISE
from vflpriv.runner.execution import run
from vflpriv.runner.planning import plan

FAST = {"model": {"hidden": 16, "out_dim": 8}, "finetune": {"epochs": 1, "batch_size": 64},
        "attack": {"name": "mc", "prior": "none", "options": {"epochs": 1}}}


def _seed(tiny, **options) -> int:
    (d,) = plan(tiny(defenses=[{"name": "label-dp", "strength": 2.0, "options": options}], **FAST)).defenses
    return d.generator.initial_seed()


def test_secure_noise_draws_from_os_entropy_and_says_the_run_is_not_reproducible(tiny):
    assert _seed(tiny) == _seed(tiny, secure_noise=False) == generator(0, "defense:0").initial_seed()
    secure = {_seed(tiny, secure_noise=True) for _ in range(3)}
    assert len(secure) == 3 and generator(0, "defense:0").initial_seed() not in secure
    (record,) = run(tiny(defenses=[{"name": "label-dp", "strength": 2.0, "options": {"secure_noise": True}}], **FAST))
    assert record.epsilon == 2.0 and SECURE_NOISE in record.notes and SEEDED_NOISE not in record.notes
