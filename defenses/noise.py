"""Where a DP defense's noise comes from and what its epsilon assumes of it (review fe F3): a stream of the run's seed
by default (reproducible; every record holds the seed), or one seeded from OS entropy with ``options.secure_noise``."""

from __future__ import annotations

import os
import re

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
                "give other numbers, a training whose records are all stored or cached is reused as it is, one stored "
                "in part is recomputed whole), and that generator is torch's Mersenne Twister, not a cryptographic "
                "one: any epsilon assumes its state is not recovered from the noise seen")


#: A DP claim in a defense's notes: "(epsilon, delta)-DP" or "epsilon-DP" (embedding-dp's test rows).
_NOTED_CLAIM = re.compile(r"\)-DP\b|\d-DP\b")


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


def claim_notes(defenses: list, configs: list, judgement: tuple) -> list[str]:
    """What each defense's noise is, for the run's notes: where ``secure_noise`` drew it (never reproducible, epsilon
    or not: review fe2 R2), or where an epsilon rests on it (recorded: its ``claims.Verdict`` in ``judgement``, the
    run's one judgement; or in its notes: embedding-dp's test rows)."""
    return [f"{c.name}: {SECURE_NOISE if secure(d) else SEEDED_NOISE}" for d, c, v in zip(defenses, configs, judgement)
            if not d.is_identity and (secure(d) or _claims(d, v.epsilon))]


def _claims(defense, epsilon: float | None) -> bool:
    """Whether ``defense`` states an epsilon for the run: recorded (``epsilon``, labels or features), or in notes."""
    recorded = epsilon is not None and {"labels", "features"} & set(defense.secrets)
    return bool(recorded) or bool(_NOTED_CLAIM.search(defense.notes()))
