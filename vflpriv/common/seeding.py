"""Independent, reproducible random streams derived from one run seed, the same on every device."""

from __future__ import annotations

import zlib

import torch


def generator(seed: int, stream: str) -> torch.Generator:
    """A CPU generator for one purpose (``"method"``, ``"defense:0"``, ``"attack"``...) of a seeded run.

    Streams are separated so that, e.g., changing a defense's strength does not shift the randomness of the
    method's batches, and the same config + seed always gives the same numbers. Every stream lives on the CPU, and
    what it draws is moved to the run's device: partitions, initial weights, batch orders, views and every defense's
    and attack's noise are then the same draws on the CPU and on a GPU, so a seed means one experiment on every
    machine (a CUDA generator draws other numbers than a CPU one from the same seed).
    """
    return torch.Generator().manual_seed(mixed(seed, stream))


def mixed(seed: int, stream: str) -> int:
    """The seed of stream ``stream`` of ``seed`` (what :func:`generator` seeds with; a fork of a generator seeded with
    ``seed``)."""
    return (seed * 1_000_003 + zlib.crc32(stream.encode())) % (2**63)
