"""Datasets as vertical splits (one feature tensor per party, labels kept apart), their loaders and
the VFL scenario drawn from them (aligned, labeled, auxiliary and test samples).

May import: common, config, store.
"""

from vflpriv.data.base import PartySpec, VerticalDataset

__all__ = ["PartySpec", "VerticalDataset"]
