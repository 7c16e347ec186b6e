"""BHI (Breast Histopathology Images, IDC) as in the FedHSSL paper: two patches of one patient per sample.

A sample pairs two patches of the same patient with the same label; party 0 (active) gets the first,
party 1 the second. Patients, not patches, are split 80/20 into train/test with a fixed
``random_state=0`` (a stand-in for an official split), so no patient appears on both sides. Within each
(patient, label) the patches are shuffled with the run seed and paired consecutively (an odd one out is
dropped). The utility metric is F1, as in the paper.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from vflpriv.common.errors import ConfigError
from vflpriv.data.base import VerticalDataset
from vflpriv.data.paths import corrupt, locate
from vflpriv.data.prep import build, cap_rows, check_parties, unit_float
from vflpriv.data.readers import read_image

BHI_LAYOUT = (
    "<patient_id>/<0|1>/*.png: 50x50 RGB patches per patient and label (Kaggle's IDC_regular_ps50_idx5 "
    "layout; that folder itself may be the root)"
)
BHI_MARKERS = ("*/[01]/*.png", "IDC_regular_ps50_idx5/*/[01]/*.png")
_TEST_FRACTION = 0.2

Pair = tuple[Path, Path, int]


def _pairs(patients: list[Path], rng: np.random.Generator) -> list[Pair]:
    """Pair each patient's patches of the same label after shuffling them with ``rng``."""
    pairs: list[Pair] = []
    for patient in patients:
        for label in (0, 1):
            files = sorted((patient / str(label)).glob("*.png"))
            order = rng.permutation(len(files))
            pairs += [(files[order[i]], files[order[i + 1]], label) for i in range(0, len(files) - 1, 2)]
    return pairs


def _images(paths: list[Path], size: int) -> torch.Tensor:
    """Read RGB patches into ``[n, 3, size, size]`` floats in [0, 1]."""
    stack = np.stack([read_image(p, mode="RGB", size=size, dataset="bhi", layout=BHI_LAYOUT) for p in paths])
    return unit_float(torch.from_numpy(stack).permute(0, 3, 1, 2))


def load_bhi(
    *,
    parties: int = 2,
    root: Path | None = None,
    max_samples: int | None = None,
    seed: int = 0,
    size: int = 50,
) -> VerticalDataset:
    """BHI patch pairs (binary IDC label, F1); patches are resized to ``size`` if they differ.

    ``max_samples`` caps the training pairs (stratified, with ``seed``) before any image is read.
    """
    check_parties("bhi", parties, (2,))
    if size < 1:
        raise ConfigError(f"bhi image size must be a positive number of pixels, not {size}")
    _, found = locate("bhi", root, BHI_MARKERS, BHI_LAYOUT)
    patient_root = found.parent.parent.parent
    patients = sorted(d for d in patient_root.iterdir() if (d / "0").is_dir() or (d / "1").is_dir())
    if len(patients) < 2:
        raise corrupt(
            "bhi", patient_root, "a patient-level train/test split needs at least 2 patients", BHI_LAYOUT
        )
    order = np.random.RandomState(0).permutation(len(patients))
    n_test = max(1, round(_TEST_FRACTION * len(patients)))
    test_patients = [patients[i] for i in sorted(order[:n_test])]
    train_patients = [patients[i] for i in sorted(order[n_test:])]
    rng = np.random.default_rng(seed)
    train, test = _pairs(train_patients, rng), _pairs(test_patients, rng)
    for split, pairs in (("train", train), ("test", test)):
        if not pairs:
            raise corrupt(
                "bhi", patient_root, f"no {split} patient has two patches with the same label", BHI_LAYOUT
            )
    y_tr = np.asarray([label for *_, label in train], dtype=np.int64)
    keep = cap_rows(y_tr, max_samples, seed=seed)
    train = [train[i] for i in keep]
    return build(
        "bhi",
        [_images([pair[k] for pair in train], size) for k in (0, 1)],
        [_images([pair[k] for pair in test], size) for k in (0, 1)],
        y_tr[keep],
        np.asarray([label for *_, label in test], dtype=np.int64),
        num_classes=2,
        modality="image",
        fitted="",
        utility_metric="f1",
    )
