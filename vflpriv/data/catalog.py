"""What each built-in dataset is, whether its files are here, and how to get them (``vflpriv datasets``).

Presence is checked by looking for one marker file where the loader would look, without loading.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Literal

from vflpriv.common.errors import DataError, UnknownNameError
from vflpriv.data import benchmark, bhi, credit, ctr, images, nuswide
from vflpriv.data.paths import how_to_get, locate

Kind = Literal["embedded", "benchmark", "user-supplied"]


@dataclass(frozen=True)
class DatasetInfo:
    """One dataset: a one-line description, where it comes from, its file layout and marker files, and the package its
    files are read with where that is an extra's (``reader``)."""

    description: str
    kind: Kind
    layout: str = ""
    markers: tuple[str, ...] = ()
    reader: str = ""


DATASET_INFO: dict[str, DatasetInfo] = {
    "digits": DatasetInfo("8x8 digits, 1797 images, 10 classes; halves/quadrants (scikit-learn)", "embedded"),
    "breast-cancer": DatasetInfo("Wisconsin breast cancer, 569 x 30, binary (scikit-learn)", "embedded"),
    "fashion-mnist": DatasetInfo(
        "Fashion-MNIST, 60k/10k 28x28, 10 classes; halves/quadrants",
        "benchmark",
        benchmark.FASHION_LAYOUT,
        benchmark.FASHION_FILES[:1],
    ),
    "fashion-mnist-views": DatasetInfo(
        "Fashion-MNIST, every party a full view of each item through its own camera (zoom, shift, rotation)",
        "benchmark",
        benchmark.FASHION_LAYOUT,
        benchmark.FASHION_FILES[:1],
    ),
    "letter": DatasetInfo(
        "UCI Letter Recognition, 20000 x 16, 26 classes; column blocks",
        "benchmark",
        benchmark.LETTER_LAYOUT,
        ("LetterRecognition.rda",),
        "rdata",
    ),
    "satellite": DatasetInfo(
        "Statlog Landsat Satellite, 6435 x 36, 6 classes; split by spectral band (2 or 4 parties)",
        "benchmark",
        benchmark.SATELLITE_LAYOUT,
        ("Satellite.rda",),
        "rdata",
    ),
    "nus-wide": DatasetInfo(
        "NUS-WIDE, 634 image features | 1000 tags, 10 single-concept classes",
        "user-supplied",
        nuswide.FULL.describe(),
        (nuswide.FULL.marker,),
    ),
    "nus-wide-lite": DatasetInfo(
        "NUS-WIDE-Lite, 634 image features | 1000 tags, 10 single-concept classes",
        "user-supplied",
        nuswide.LITE.describe(),
        (nuswide.LITE.marker,),
    ),
    "avazu": DatasetInfo(
        "Avazu CTR, FedHSSL's two-party field split, binary (AUC)",
        "user-supplied",
        ctr.AVAZU_LAYOUT,
        ctr.AVAZU_TRAIN,
    ),
    "criteo": DatasetInfo(
        "Criteo CTR, 26 categorical (active) | 13 numeric, binary (AUC)",
        "user-supplied",
        ctr.CRITEO_LAYOUT,
        ctr.CRITEO_TRAIN,
    ),
    "cifar10": DatasetInfo(
        "CIFAR-10, 50k/10k 32x32 RGB, 10 classes; halves/quadrants",
        "user-supplied",
        images.CIFAR_LAYOUT,
        images.CIFAR_MARKERS,
    ),
    "credit-default": DatasetInfo(
        "UCI default of credit card clients, 30000 x 23, binary; behaviour | profile",
        "user-supplied",
        credit.CREDIT_LAYOUT,
        credit.CREDIT_FILES,
    ),
    "bhi": DatasetInfo(
        "Breast histopathology patches, pairs of one patient's patches, binary (F1)",
        "user-supplied",
        bhi.BHI_LAYOUT,
        bhi.BHI_MARKERS,
    ),
    "modelnet": DatasetInfo(
        "ModelNet 12-view renders, 3 views per party (4 parties)",
        "user-supplied",
        images.MODELNET_LAYOUT,
        images.MODELNET_MARKERS,
    ),
}


def status(name: str) -> tuple[bool, str | None, str]:
    """(files present, where they were found, how to get them) for the dataset ``name``."""
    info = DATASET_INFO.get(name)
    if info is None:
        raise UnknownNameError(f"unknown dataset '{name}'; known datasets: {', '.join(DATASET_INFO)}")
    if info.kind == "embedded":
        return True, "bundled with scikit-learn", "nothing to do"
    hint = how_to_get(name, info.layout)
    try:
        directory, _ = locate(name, None, info.markers, info.layout)
    except DataError:
        return False, None, hint
    if info.reader and importlib.util.find_spec(info.reader) is None:  # files here, but no reader: not usable yet
        return False, str(directory), (f"its files are in {directory}, but reading them needs the '{info.reader}' "
                                       "package: pip install 'vflpriv[data]'")
    return True, str(directory), hint


def check_files(name: str, root: str | None) -> None:
    """Refuse a dataset whose files are not here before its loader runs: one line naming the file it looked for,
    where, and how to get it (:class:`DataError`); a bundled dataset, or a plugin's, passes (its loader checks)."""
    info = DATASET_INFO.get(name)
    if info is not None and info.kind != "embedded":
        locate(name, root, info.markers, info.layout)
