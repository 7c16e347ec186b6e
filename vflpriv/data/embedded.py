"""Datasets bundled with scikit-learn, so a fresh install runs with nothing downloaded.

Both use a fixed stratified 80/20 train/test split (``random_state=0``), playing the role of an
official split: the run seed varies the VFL partition, never the test set. ``max_samples`` caps the
training rows (a stratified draw with the loader's fixed seed); the test set stays whole. Both are read from
scikit-learn's files and split as scikit-learn splits them, without importing it (``vflpriv.data.bundled``,
``vflpriv.data.prep.stratified_split``: the same arrays, about 1.2 CPU s sooner).
"""

from __future__ import annotations

from math import ceil
from pathlib import Path

import numpy as np
import torch

from vflpriv.data import bundled
from vflpriv.data.base import PartySpec, VerticalDataset
from vflpriv.data.prep import STANDARDISED, cap_rows, stratified_split
from vflpriv.data.splits import column_blocks, image_parts

_TEST_FRACTION = 0.2


def _split(x: np.ndarray, y: np.ndarray, max_samples: int | None, seed: int) -> tuple[np.ndarray, ...]:
    n_test = ceil(_TEST_FRACTION * len(y))  # train_test_split's count of test_size=0.2
    train, test = stratified_split(y, n_train=len(y) - n_test, n_test=n_test, seed=0)
    keep = cap_rows(y[train], max_samples, seed=seed)
    return x[train][keep], x[test], y[train][keep], y[test]


def _read(name: str, sklearn_loader: str) -> tuple[np.ndarray, np.ndarray]:
    """(features, labels) of a bundled dataset, from scikit-learn's file; its own loader where that is not found."""
    found = bundled.read(name)
    if found is not None:
        return found
    import sklearn.datasets

    bunch = getattr(sklearn.datasets, sklearn_loader)()
    return bunch.data, bunch.target


def _bundled(name: str):
    """Mark a loader whose data ships with scikit-learn as ``name``'s file: ``vflpriv.data.load`` caches its tensors,
    keyed by that file's digest (see there)."""

    def mark(loader):
        loader.bundled_as = name
        return loader

    return mark


def _defaults(section: str, **values):
    """Attach a dataset's own defaults for a config section (``partition``, ``model``): they fill every
    field of that section the user does not set."""

    def mark(loader):
        setattr(loader, f"default_{section}", values)
        return loader

    return mark


#: A digits half is 32 pixels: 128-wide encoders (the reference's 512 are sized for NUS-WIDE's 634 and 1000
#: features) keep the quick start quick; on digits they match 512's utility, attack and CAP within noise.
@_bundled("digits")
@_defaults("model", hidden=128, out_dim=128)
def load_digits(
    *, parties: int = 2, root: Path | None = None, max_samples: int | None = None, seed: int = 0
) -> VerticalDataset:
    """8x8 handwritten digits (1797 images, 10 classes): left/right halves or quadrants, scaled to [0, 1]."""
    flat, target = _read("digits", "load_digits")
    images = flat.reshape(-1, 8, 8).astype(np.float32)[:, None] / 16.0
    x_tr, x_te, y_tr, y_te = _split(images, target, max_samples, seed)
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
        fitted_features=("",) * len(tr_parts),  # a fixed scaling (/16)
    )


@_bundled("breast-cancer")
@_defaults("partition", labeled=80, aux=20)  # 20% of 455 training rows are 91 aligned: 200 labels cannot fit
def load_breast_cancer(
    *, parties: int = 2, root: Path | None = None, max_samples: int | None = None, seed: int = 0
) -> VerticalDataset:
    """Wisconsin breast cancer (569 x 30, binary): features split in contiguous blocks, standardised on train."""
    data, target = _read("breast-cancer", "load_breast_cancer")
    x_tr, x_te, y_tr, y_te = _split(data.astype(np.float32), target, max_samples, seed)
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
        fitted_features=(STANDARDISED,) * len(tr),
    )
