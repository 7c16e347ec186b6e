"""Image datasets from the papers, read from the files users hold: CIFAR-10 and ModelNet multi-view.

CIFAR-10 (one-shot VFL paper): each party holds one half (or quadrant) of every image. ModelNet
(FedHSSL paper): 12 rendered views per object, split sequentially into groups of nearby views, one
group per party, the views of a group stacked as grey-level channels.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

from vflpriv.common.errors import ConfigError, DataError
from vflpriv.data.base import VerticalDataset
from vflpriv.data.paths import corrupt, locate, require
from vflpriv.data.prep import build, cap_rows, check_parties, unit_float
from vflpriv.data.readers import read_array_pickle, read_image
from vflpriv.data.splits import image_parts

CIFAR_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR_LAYOUT = (
    "cifar-10-batches-py/ (or its contents): data_batch_1..data_batch_5 and test_batch, python pickles "
    "of dicts with b'data' (n x 3072 uint8, channel-major 32x32) and b'labels' (n ints 0..9)"
)
MODELNET_LAYOUT = (
    "<class>/<train|test>/<object>_<view>.png with 12 views 001..012 per object, as in MVCNN's "
    "12-view ModelNet10/40 renders (<object>.obj.shaded_v001.png .. _v012.png)"
)
CIFAR_MARKERS = ("data_batch_1", "cifar-10-batches-py/data_batch_1")
MODELNET_MARKERS = ("*/train/*.png", "*/test/*.png")
MODELNET_VIEWS = 12
_VIEW_NAME = re.compile(r"^(?P<object>.+?)(?:\.obj\.shaded)?_v?(?P<view>\d{3})\.png$")


def _cifar_batches(directory: Path, files: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate pickle batches into ``[n, 3, 32, 32]`` uint8 images and int64 labels."""
    images, labels = [], []
    for file in files:
        path = require("cifar10", directory / file, CIFAR_LAYOUT)
        batch = read_array_pickle(path, dataset="cifar10", layout=CIFAR_LAYOUT)
        data = batch.get(b"data", batch.get("data"))
        target = batch.get(b"labels", batch.get("labels"))
        if not isinstance(data, np.ndarray) or data.ndim != 2 or data.shape[1] != 3072:
            raise corrupt("cifar10", path, "b'data' is not an n x 3072 array", CIFAR_LAYOUT)
        target = np.asarray(target if target is not None else [], dtype=np.int64)
        if target.shape != (len(data),) or target.min(initial=0) < 0 or target.max(initial=0) > 9:
            raise corrupt("cifar10", path, "b'labels' must hold one class 0..9 per image", CIFAR_LAYOUT)
        images.append(data.astype(np.uint8).reshape(-1, 3, 32, 32))
        labels.append(target)
    return np.concatenate(images), np.concatenate(labels)


def load_cifar10(
    *, parties: int = 2, root: Path | None = None, max_samples: int | None = None, seed: int = 0
) -> VerticalDataset:
    """CIFAR-10 python batches (50k train / 10k test, 32x32 RGB in [0, 1]): halves or quadrants."""
    check_parties("cifar10", parties, (1, 2, 4))
    _, first = locate("cifar10", root, CIFAR_MARKERS, CIFAR_LAYOUT)
    x_tr, y_tr = _cifar_batches(first.parent, CIFAR_TRAIN)
    x_te, y_te = _cifar_batches(first.parent, ("test_batch",))
    keep = cap_rows(y_tr, max_samples, seed=seed)
    x_tr, y_tr = x_tr[keep], y_tr[keep]

    def parts(images: np.ndarray) -> list[torch.Tensor]:
        return [unit_float(p) for p in image_parts(torch.from_numpy(images), parties)]

    return build("cifar10", parts(x_tr), parts(x_te), y_tr, y_te, num_classes=10, modality="image", fitted="")


def _modelnet_objects(class_dir: Path, split: str) -> list[list[Path]]:
    """The 12 view files of every object of one class and split, in view order."""
    views: dict[str, dict[int, Path]] = defaultdict(dict)
    for path in sorted((class_dir / split).glob("*.png")):
        match = _VIEW_NAME.match(path.name)
        if match is None:
            raise corrupt("modelnet", path, "the file name has no 3-digit view number", MODELNET_LAYOUT)
        views[match["object"]][int(match["view"])] = path
    objects = []
    for obj, by_view in sorted(views.items()):
        if sorted(by_view) != list(range(1, MODELNET_VIEWS + 1)):
            where = class_dir / split / obj
            raise corrupt("modelnet", where, f"views {sorted(by_view)} instead of 1..12", MODELNET_LAYOUT)
        objects.append([by_view[v] for v in range(1, MODELNET_VIEWS + 1)])
    return objects


def _read_views(paths: list[Path], size: int) -> np.ndarray:
    """One object's views as grey ``[views, size, size]`` uint8."""
    return np.stack(
        [read_image(p, mode="L", size=size, dataset="modelnet", layout=MODELNET_LAYOUT) for p in paths]
    )


def load_modelnet(
    *,
    parties: int = 4,
    root: Path | None = None,
    max_samples: int | None = None,
    seed: int = 0,
    size: int = 32,
    classes: int | None = None,
) -> VerticalDataset:
    """ModelNet 12-view renders: party k holds views 12k/K+1..12(k+1)/K as grey channels, ``size`` pixels.

    Classes are the sorted class folders; ``classes=N`` keeps the first N (the FedHSSL paper uses the
    first 10 of ModelNet40). ``max_samples`` caps training objects before any image is read.
    """
    check_parties("modelnet", parties, (1, 2, 3, 4, 6, 12))
    if size < 1:
        raise ConfigError(f"modelnet image size must be a positive number of pixels, not {size}")
    _, found = locate("modelnet", root, MODELNET_MARKERS, MODELNET_LAYOUT)
    class_root = found.parent.parent.parent
    names = sorted(d.name for d in class_root.iterdir() if (d / "train").is_dir() or (d / "test").is_dir())
    if classes is not None:
        if not 1 <= classes <= len(names):
            raise ConfigError(
                f"modelnet has {len(names)} classes in {class_root}; classes must be 1..{len(names)}"
            )
        names = names[:classes]

    def read_split(split_name: str, cap: int | None) -> tuple[torch.Tensor, np.ndarray]:
        objects, labels = [], []
        for label, cls in enumerate(names):
            found_objects = _modelnet_objects(class_root / cls, split_name)
            objects += found_objects
            labels += [label] * len(found_objects)
        if not objects:
            raise DataError(
                f"modelnet: no {split_name} objects under {class_root}; expected layout: {MODELNET_LAYOUT}"
            )
        y = np.asarray(labels, dtype=np.int64)
        keep = cap_rows(y, cap, seed=seed)
        views = np.stack([_read_views(objects[i], size) for i in keep])
        return torch.from_numpy(views), y[keep]

    x_tr, y_tr = read_split("train", max_samples)
    x_te, y_te = read_split("test", None)
    per_party = MODELNET_VIEWS // parties
    groups = [slice(k * per_party, (k + 1) * per_party) for k in range(parties)]
    return build(
        "modelnet",
        [unit_float(x_tr[:, g]) for g in groups],
        [unit_float(x_te[:, g]) for g in groups],
        y_tr,
        y_te,
        num_classes=len(names),
        modality="image",
        fitted="",
    )
