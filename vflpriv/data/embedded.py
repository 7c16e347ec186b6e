"""Datasets bundled with scikit-learn, so a fresh install runs with nothing downloaded.

Both use a fixed stratified 80/20 train/test split (``random_state=0``), playing the role of an
official split: the run seed varies the VFL partition, never the test set. ``max_samples`` caps the
training rows (a stratified draw with the loader's fixed seed); the test set stays whole.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from vflpriv.data.base import PartySpec, VerticalDataset
from vflpriv.data.prep import cap_rows
from vflpriv.data.splits import column_blocks, image_parts

_TEST_FRACTION = 0.2


def _split(x: np.ndarray, y: np.ndarray, max_samples: int | None, seed: int) -> tuple[np.ndarray, ...]:
    from sklearn.model_selection import train_test_split

    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=_TEST_FRACTION, stratify=y, random_state=0)
    keep = cap_rows(y_tr, max_samples, seed=seed)
    return x_tr[keep], x_te, y_tr[keep], y_te


def _bundled(loader):
    """Mark a loader whose data ships with scikit-learn: ``vflpriv.data.load`` caches its tensors, keyed
    by scikit-learn's version (see there)."""
    loader.bundled_by = "scikit-learn"
    return loader


def _defaults(section: str, **values):
    """Attach a dataset's own defaults for a config section (``partition``, ``model``): they fill every
    field of that section the user does not set."""

    def mark(loader):
        setattr(loader, f"default_{section}", values)
        return loader

    return mark


#: A digits half is 32 pixels: 128-wide encoders (the reference's 512 are sized for NUS-WIDE's 634 and 1000
#: features) keep the quick start quick; on digits they match 512's utility, attack and CAP within noise.
@_bundled
@_defaults("model", hidden=128, out_dim=128)
def load_digits(
    *, parties: int = 2, root: Path | None = None, max_samples: int | None = None, seed: int = 0
) -> VerticalDataset:
    """8x8 handwritten digits (1797 images, 10 classes): left/right halves or quadrants, scaled to [0, 1]."""
    from sklearn.datasets import load_digits as bundled

    bunch = bundled()
    images = bunch.images.astype(np.float32)[:, None] / 16.0
    x_tr, x_te, y_tr, y_te = _split(images, bunch.target, max_samples, seed)
    tr_parts = image_parts(torch.from_numpy(x_tr), parties)
    te_parts = image_parts(torch.from_numpy(x_te), parties)
    return VerticalDataset(
        name="digits",
        x_train=tuple(tr_parts),
        y_train=torch.from_numpy(y_tr).long(),
        x_test=tuple(te_parts),
        y_test=torch.from_numpy(y_te).long(),
        num_classes=10,
        specs=tuple(PartySpec("image", tuple(p.shape[1:])) for p in tr_parts),
    )


@_bundled
@_defaults("partition", labeled=80, aux=20)  # 20% of 455 training rows are 91 aligned: 200 labels cannot fit
def load_breast_cancer(
    *, parties: int = 2, root: Path | None = None, max_samples: int | None = None, seed: int = 0
) -> VerticalDataset:
    """Wisconsin breast cancer (569 x 30, binary): features split in contiguous blocks, standardised on train."""
    from sklearn.datasets import load_breast_cancer as bundled

    bunch = bundled()
    x_tr, x_te, y_tr, y_te = _split(bunch.data.astype(np.float32), bunch.target, max_samples, seed)
    mean, std = x_tr.mean(0), x_tr.std(0) + 1e-8
    tr = column_blocks(torch.from_numpy((x_tr - mean) / std), parties)
    te = column_blocks(torch.from_numpy((x_te - mean) / std), parties)
    return VerticalDataset(
        name="breast-cancer",
        x_train=tuple(tr),
        y_train=torch.from_numpy(y_tr).long(),
        x_test=tuple(te),
        y_test=torch.from_numpy(y_te).long(),
        num_classes=2,
        specs=tuple(PartySpec("tabular", (p.shape[1],)) for p in tr),
    )
