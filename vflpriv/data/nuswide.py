"""NUS-WIDE (full and Lite) in the FedHSSL setting: image features at the active party, tags at the other.

Party 0 (active) holds the 634 low-level features CH (64), CM55 (225), CORR (144), EDH (73) and WT (128),
concatenated in that order; party 1 holds the 1000 tag indicators. The task is the 10 concepts
sky, clouds, person, water, animal, grass, buildings, window, plants, lake, keeping only images labelled
with exactly one of them. The official train/test split is kept and both parties are standardised
with train statistics (the authors' code fits the scaler per split; vflpriv fits it on train only).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vflpriv.data.base import VerticalDataset
from vflpriv.data.paths import corrupt, locate, require
from vflpriv.data.prep import STANDARDISED, build, cap_rows, check_parties, standardize
from vflpriv.data.readers import read_table

CONCEPTS = ("sky", "clouds", "person", "water", "animal", "grass", "buildings", "window", "plants", "lake")
FEATURES = (("CH", 64), ("CM55", 225), ("CORR", 144), ("EDH", 73), ("WT", 128))
N_TAGS = 1000


@dataclass(frozen=True)
class _Layout:
    """Relative file names of one NUS-WIDE release; ``{split}`` is Train or Test."""

    dataset: str
    feature: str  # with {name} and {split}
    tags: str
    label: str  # with {concept} and {split}

    @property
    def marker(self) -> str:
        """The file whose presence identifies this release's directory."""
        return self.tags.format(split="Train")

    def describe(self) -> str:
        return (
            f"{self.feature.format(name='<CH|CM55|CORR|EDH|WT>', split='<Train|Test>')} (space-separated), "
            f"{self.tags.format(split='<Train|Test>')} (1000 tab-separated 0/1 columns), "
            f"{self.label.format(concept='<concept>', split='<Train|Test>')} (one 0/1 per line) "
            f"for the concepts {', '.join(CONCEPTS)}"
        )


FULL = _Layout(
    "nus-wide",
    "Low_Level_Features/{split}_Normalized_{name}.dat",
    "NUS_WID_Tags/{split}_Tags1k.dat",
    "Groundtruth/TrainTestLabels/Labels_{concept}_{split}.txt",
)
LITE = _Layout(
    "nus-wide-lite",
    "NUS-WIDE-Lite_features/Normalized_{name}_Lite_{split}.dat",
    "NUS-WIDE-Lite_tags/Lite_Tags1k_{split}.txt",
    "NUS-WIDE-Lite_groundtruth/Lite_Labels_{concept}_{split}.txt",
)


def _matrix(path: Path, layout: _Layout, columns: int) -> np.ndarray:
    """Read a whitespace-separated numeric matrix and check its number of columns."""
    frame = read_table(
        path, dataset=layout.dataset, layout=layout.describe(), sep=r"\s+", header=None, dtype=np.float32
    )
    if frame.shape[1] != columns:
        raise corrupt(
            layout.dataset, path, f"expected {columns} columns, found {frame.shape[1]}", layout.describe()
        )
    return frame.to_numpy(np.float32)


def _split(directory: Path, layout: _Layout, split: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Image features, tags and labels of one split, restricted to images with exactly one concept."""
    text = layout.describe()

    def path(relative: str) -> Path:
        return require(layout.dataset, directory / relative, text)

    labels = [path(layout.label.format(concept=c, split=split)) for c in CONCEPTS]
    onehot = np.concatenate([_matrix(p, layout, 1) for p in labels], axis=1)
    n = len(onehot)
    keep = onehot.sum(1) == 1
    blocks = []
    for name, width in FEATURES:
        feature_path = path(layout.feature.format(name=name, split=split))
        block = _matrix(feature_path, layout, width)
        if len(block) != n:
            raise corrupt(layout.dataset, feature_path, f"{len(block)} rows but the labels have {n}", text)
        blocks.append(block[keep])
    tags_path = path(layout.tags.format(split=split))
    tags = _matrix(tags_path, layout, N_TAGS)
    if len(tags) != n:
        raise corrupt(layout.dataset, tags_path, f"{len(tags)} rows but the labels have {n}", text)
    return np.concatenate(blocks, axis=1), tags[keep], onehot[keep].argmax(1)


def _load(
    layout: _Layout, parties: int, root: Path | None, max_samples: int | None, seed: int
) -> VerticalDataset:
    check_parties(layout.dataset, parties, (2,))
    directory, _ = locate(layout.dataset, root, (layout.marker,), layout.describe())
    img_tr, tag_tr, y_tr = _split(directory, layout, "Train")
    img_te, tag_te, y_te = _split(directory, layout, "Test")
    keep = cap_rows(y_tr, max_samples, seed=seed)
    img_tr, img_te = standardize(img_tr[keep], img_te)
    tag_tr, tag_te = standardize(tag_tr[keep], tag_te)
    return build(
        layout.dataset,
        [img_tr, tag_tr],
        [img_te, tag_te],
        y_tr[keep],
        y_te,
        num_classes=len(CONCEPTS),
        modality="tabular",
        fitted=STANDARDISED,
    )


def load_nus_wide(
    *, parties: int = 2, root: Path | None = None, max_samples: int | None = None, seed: int = 0
) -> VerticalDataset:
    """NUS-WIDE (official release layout): 634 image features | 1000 tags, 10 single-concept classes."""
    return _load(FULL, parties, root, max_samples, seed)


def load_nus_wide_lite(
    *, parties: int = 2, root: Path | None = None, max_samples: int | None = None, seed: int = 0
) -> VerticalDataset:
    """NUS-WIDE-Lite (its own file names, same features, tags and concepts as the full release)."""
    return _load(LITE, parties, root, max_samples, seed)
