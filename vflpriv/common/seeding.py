"""Independent, reproducible random streams derived from one run seed."""

from __future__ import annotations

import zlib

import torch


def generator(seed: int, stream: str, *, device: torch.device | str = "cpu") -> torch.Generator:
    """A generator for one purpose (``"method"``, ``"defense:0"``, ``"attack"``...) of a seeded run.

    Streams are separated so that, e.g., changing a defense's strength does not shift the
    randomness of the method's batches, and the same config + seed always gives the same numbers.
    """
    mixed = (seed * 1_000_003 + zlib.crc32(stream.encode())) % (2**63)
    return torch.Generator(device=device).manual_seed(mixed)
