"""Benchmark datasets installable from Debian: Fashion-MNIST and mlbench's Letter and Satellite.

Get them with ``bash scripts/get-datasets.sh`` (packages ``dataset-fashion-mnist`` and ``r-cran-mlbench``).
They are real, mid-sized stand-ins for the papers' data: Fashion-MNIST halves/quadrants for CIFAR-10
halves and 4-party Modelnet, Letter (26 classes) and Satellite (6 classes, 4 spectral bands) for the
multi-class tabular NUS-WIDE.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from vflpriv.data.base import VerticalDataset
from vflpriv.data.paths import corrupt, locate, require
from vflpriv.data.prep import (
    STANDARDISED,
    as_labels,
    build,
    cap_rows,
    check_parties,
    fixed_split,
    standardize,
    unit_float,
)
from vflpriv.data.readers import read_idx, read_rda
from vflpriv.data.splits import column_blocks, image_parts, image_views

FASHION_FILES = (
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
)
FASHION_LAYOUT = "gzipped IDX files " + ", ".join(FASHION_FILES) + " (Debian package dataset-fashion-mnist)"
LETTER_LAYOUT = (
    "mlbench's LetterRecognition.rda: 20000 x (lettr, 16 numeric attributes) (Debian r-cran-mlbench)"
)
SATELLITE_LAYOUT = "mlbench's Satellite.rda: 6435 x (x.1..x.36, classes) in UCI order (Debian r-cran-mlbench)"

_LETTER_TEST_ROWS = 4000
_SATELLITE_TRAIN_ROWS = 4435  # UCI statlog sat.trn; the remaining 2000 rows are sat.tst
_SATELLITE_BANDS = {1: ((0, 1, 2, 3),), 2: ((0, 1), (2, 3)), 4: ((0,), (1,), (2,), (3,))}


def _fashion_files(root: Path | None) -> list[Path]:
    """The four files a Fashion-MNIST load reads (``vflpriv.data.load`` names the data by their digest)."""
    directory, _ = locate("fashion-mnist", root, FASHION_FILES[:1], FASHION_LAYOUT)
    return [require("fashion-mnist", directory / f, FASHION_LAYOUT) for f in FASHION_FILES]


def load_fashion_mnist(
    *, parties: int = 2, root: Path | None = None, max_samples: int | None = None, seed: int = 0
) -> VerticalDataset:
    """Fashion-MNIST (60k train / 10k test, 28x28, 10 classes) as image halves or quadrants in [0, 1]."""
    name = "fashion-mnist"
    check_parties(name, parties, (1, 2, 4))
    directory, _ = locate(name, root, FASHION_FILES[:1], FASHION_LAYOUT)

    def read_pair(images_file: str, labels_file: str) -> tuple[np.ndarray, np.ndarray]:
        paths = [require(name, directory / f, FASHION_LAYOUT) for f in (images_file, labels_file)]
        images, labels = (read_idx(p, dataset=name, layout=FASHION_LAYOUT) for p in paths)
        if images.ndim != 3:
            raise corrupt(
                name, paths[0], f"expected [n, 28, 28] images, found shape {images.shape}", FASHION_LAYOUT
            )
        if labels.shape != (len(images),):
            raise corrupt(
                name, paths[1], f"expected {len(images)} labels, found shape {labels.shape}", FASHION_LAYOUT
            )
        return images, labels.astype(np.int64)

    x_tr, y_tr = read_pair(*FASHION_FILES[:2])
    x_te, y_te = read_pair(*FASHION_FILES[2:])
    keep = cap_rows(y_tr, max_samples, seed=seed)
    x_tr, y_tr = x_tr[keep], y_tr[keep]

    def parts(images: np.ndarray) -> list[torch.Tensor]:
        return [unit_float(p) for p in image_parts(torch.from_numpy(images).unsqueeze(1), parties)]

    return build(name, parts(x_tr), parts(x_te), y_tr, y_te, num_classes=10, modality="image", fitted="")


load_fashion_mnist.files_read = _fashion_files


def load_fashion_mnist_views(
    *, parties: int = 2, root: Path | None = None, max_samples: int | None = None, seed: int = 0
) -> VerticalDataset:
    """Fashion-MNIST with every party holding a full 28x28 view of each item through its own camera (zoom, shift,
    rotation; ``vflpriv.data.splits.image_views``): independent views of one object sharing its label, the premise
    of FedHSSL's cross-party SSL (its ModelNet and BHI parties), where halves of one image give it no edge."""
    halves = load_fashion_mnist(parties=1, root=root, max_samples=max_samples, seed=seed)
    views = [image_views(x, parties, seed=index) for index, x in enumerate((halves.x_train[0], halves.x_test[0]))]
    return build("fashion-mnist-views", *views, halves.y_train.numpy(), halves.y_test.numpy(), num_classes=10,
                 modality="image", fitted="")


load_fashion_mnist_views.files_read = _fashion_files


def load_letter(
    *, parties: int = 2, root: Path | None = None, max_samples: int | None = None, seed: int = 0
) -> VerticalDataset:
    """UCI Letter Recognition from mlbench (20000 x 16, 26 classes): contiguous column blocks.

    mlbench has no official split, so a fixed stratified 16000/4000 split (``random_state=0``) stands in
    for one; features are standardised with train statistics.
    """
    name = "letter"
    _, path = locate(name, root, ("LetterRecognition.rda",), LETTER_LAYOUT)
    frame = read_rda(path, "LetterRecognition", dataset=name, layout=LETTER_LAYOUT)
    if "lettr" not in frame.columns or frame.shape[1] != 17:
        raise corrupt(
            name, path, f"expected columns lettr + 16 attributes, found {frame.shape[1]}", LETTER_LAYOUT
        )
    y, num_classes = as_labels(frame["lettr"])
    x = frame.drop(columns="lettr").to_numpy(np.float32)
    tr, te = fixed_split(y, test_size=_LETTER_TEST_ROWS)
    tr = tr[cap_rows(y[tr], max_samples, seed=seed)]
    x_tr, x_te = standardize(x[tr], x[te])
    return build(
        name,
        column_blocks(torch.from_numpy(x_tr), parties),
        column_blocks(torch.from_numpy(x_te), parties),
        y[tr],
        y[te],
        num_classes=num_classes,
        modality="tabular",
        fitted=STANDARDISED,
    )


def satellite_columns(bands: tuple[int, ...]) -> list[int]:
    """Column indices of the given spectral bands (0-based) for all 9 pixels of the 3x3 neighbourhood.

    mlbench documents the order: pixels left-to-right, top-to-bottom, and for each pixel its four
    spectral values, so ``x.(4p + b + 1)`` is band ``b`` of pixel ``p``.
    """
    return [4 * pixel + band for band in bands for pixel in range(9)]


def load_satellite(
    *, parties: int = 2, root: Path | None = None, max_samples: int | None = None, seed: int = 0
) -> VerticalDataset:
    """Statlog Landsat Satellite from mlbench (6435 x 36, 6 classes), split by spectral band.

    Two parties hold the visible bands {1, 2} / the near-infrared bands {3, 4}; four parties hold one
    band each (9 pixel values). The official UCI split is kept: first 4435 rows train, last 2000 test.
    Features are standardised with train statistics.
    """
    name = "satellite"
    check_parties(name, parties, tuple(_SATELLITE_BANDS))
    _, path = locate(name, root, ("Satellite.rda",), SATELLITE_LAYOUT)
    frame = read_rda(path, "Satellite", dataset=name, layout=SATELLITE_LAYOUT)
    if "classes" not in frame.columns or frame.shape != (6435, 37):
        raise corrupt(
            name, path, f"expected 6435 x 37 (x.1..x.36, classes), found {frame.shape}", SATELLITE_LAYOUT
        )
    y, num_classes = as_labels(frame["classes"])
    x = frame[[f"x.{i}" for i in range(1, 37)]].to_numpy(np.float32)
    tr = cap_rows(y[:_SATELLITE_TRAIN_ROWS], max_samples, seed=seed)
    te = np.arange(_SATELLITE_TRAIN_ROWS, len(y))
    x_tr, x_te = standardize(x[tr], x[te])
    groups = [satellite_columns(bands) for bands in _SATELLITE_BANDS[parties]]
    return build(
        name,
        [x_tr[:, cols] for cols in groups],
        [x_te[:, cols] for cols in groups],
        y[tr],
        y[te],
        num_classes=num_classes,
        modality="tabular",
        fitted=STANDARDISED,
    )
