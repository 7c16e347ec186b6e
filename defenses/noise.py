"""Where a DP defense's noise comes from and what its epsilon assumes of it (review fe F3): a stream of the run's seed
by default (reproducible; every record holds the seed), or one seeded from OS entropy with ``options.secure_noise``."""

from __future__ import annotations

import os

import torch
from pydantic import Field

from vflpriv.common.seeding import generator
from vflpriv.config.options import Options

#: What every recorded epsilon assumes of its mechanism's noise (review fe F3): the run's notes say it beside each.
SEEDED_NOISE = ("the epsilon assumes the adversary does not know the mechanism's generator state: vflpriv seeds it "
                "from the run's seed for reproducibility, and one who knows that seed (every record holds it) can "
                "regenerate the noise and strip it")

#: What an epsilon says instead where ``options.secure_noise`` drew the noise (review fe F3).
SECURE_NOISE = ("its noise came from a generator seeded from OS entropy (options.secure_noise), not from the run's "
                "seed: the record does not regenerate it, and this run is not reproducible (the same config and seed "
                "give other numbers; a stored or cached result is reused as it is); that generator is torch's Mersenne "
                "Twister, not a cryptographic one: the epsilon assumes its state is not recovered from the noise seen")


class NoiseOptions(Options):
    """Options of a DP defense whose claim rests on noise the adversary cannot regenerate (review fe F3)."""

    secure_noise: bool = Field(False, description="draw the mechanism's noise from a generator seeded from OS entropy, "
                               "not from the run's seed (which every record holds): the epsilon then does not assume "
                               "the seed secret, but the run is not reproducible (same config and seed, other numbers)")


def secure(defense) -> bool:
    """Whether ``defense``'s noise comes from OS entropy (``options.secure_noise``), not from the run's seed."""
    return bool(getattr(defense.options, "secure_noise", False))


def noise_stream(seed: int, index: int, options) -> torch.Generator:
    """Defense ``index``'s random stream: from the run's seed, or, where its options ask for ``secure_noise``, from OS
    entropy (the record's seed does not regenerate its noise)."""
    if getattr(options, "secure_noise", False):
        return torch.Generator().manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
    return generator(seed, f"defense:{index}")


def claim_notes(defenses: list, configs: list) -> list[str]:
    """Per defense whose epsilon a run records (on the labels or the features), what that epsilon assumes of its
    noise, for the run's notes."""
    return [f"{c.name}: {SECURE_NOISE if secure(d) else SEEDED_NOISE}" for d, c in zip(defenses, configs)
            if not d.uncovered and {"labels", "features"} & set(d.secrets) and d.privacy_spent() is not None]
