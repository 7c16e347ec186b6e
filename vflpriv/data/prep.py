"""Preprocessing shared by the loaders: capping, fixed splits, scaling fitted on train, category codes.

Every statistic (mean, std, min, max, category vocabulary) is fitted on the training rows only, so the
test set never leaks into preprocessing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from vflpriv.common.errors import ConfigError
from vflpriv.data.base import Modality, PartySpec, VerticalDataset

if TYPE_CHECKING:
    import pandas as pd


def check_parties(dataset: str, parties: int, allowed: Sequence[int]) -> None:
    """Raise ConfigError unless ``parties`` is one of the splits ``dataset`` defines."""
    if parties not in allowed:
        choices = ", ".join(str(p) for p in allowed)
        raise ConfigError(f"{dataset} splits into {choices} parties, not {parties}")


def cap_rows(y: np.ndarray, max_samples: int | None, *, seed: int) -> np.ndarray:
    """Sorted indices of at most ``max_samples`` rows drawn with ``seed``, stratified by label if possible."""
    n = len(y)
    if max_samples is None:
        return np.arange(n)
    if max_samples < 1:
        raise ConfigError(f"max_samples must be a positive number of rows, not {max_samples}")
    if max_samples >= n:
        return np.arange(n)
    try:  # scikit-learn's train_test_split(np.arange(n), train_size=max_samples, stratify=y, random_state=seed)
        idx, _ = stratified_split(y, n_train=max_samples, n_test=n - max_samples, seed=seed)
    except ValueError:  # a class too small to stratify, or fewer rows than classes
        idx = np.random.default_rng(seed).choice(n, max_samples, replace=False)
    return np.sort(idx)


def stratified_split(y: np.ndarray, *, n_train: int, n_test: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(train indices, test indices) as scikit-learn's ``train_test_split(..., stratify=y, random_state=seed)``
    draws them (its ``StratifiedShuffleSplit``, the same since scikit-learn 0.24): per class a permutation of its
    rows, the first ``n_i`` to train and the next ``t_i`` to test (:func:`approximate_mode` of the class counts),
    then each side permuted, all drawn from one ``RandomState(seed)`` in that order. Written out, it costs no
    scikit-learn import (about 1.2 CPU s of a cold command) and depends on numpy's legacy ``RandomState`` alone, whose
    streams numpy keeps fixed (NEP 19). ValueError where scikit-learn refuses: a class of one row, or fewer train or
    test rows than classes. ``tests/data/test_bundled.py`` checks it against scikit-learn."""
    _, y_indices, class_counts = np.unique(y, return_inverse=True, return_counts=True)
    if class_counts.min() < 2 or min(n_train, n_test) < len(class_counts):
        raise ValueError("too few rows per class to stratify")
    class_indices = np.split(np.argsort(y_indices, kind="stable"), np.cumsum(class_counts)[:-1])
    rng = np.random.RandomState(seed)
    n_i = approximate_mode(class_counts, n_train, rng)
    t_i = approximate_mode(class_counts - n_i, n_test, rng)
    train: list[int] = []
    test: list[int] = []
    for i, rows in enumerate(class_indices):
        drawn = rows.take(rng.permutation(class_counts[i]), mode="clip")
        train.extend(drawn[: n_i[i]])
        test.extend(drawn[n_i[i]: n_i[i] + t_i[i]])
    return rng.permutation(train), rng.permutation(test)


def approximate_mode(class_counts: np.ndarray, n_draws: int, rng: np.random.RandomState) -> np.ndarray:
    """How many of ``n_draws`` rows each class gets (scikit-learn's ``_approximate_mode``): the floor of its share,
    then one more for the classes with the largest remainders, ties broken by ``rng``."""
    continuous = class_counts / class_counts.sum() * n_draws
    floored = np.floor(continuous)
    need_to_add = int(n_draws - floored.sum())
    if need_to_add > 0:
        remainder = continuous - floored
        for value in np.sort(np.unique(remainder))[::-1]:
            (inds,) = np.where(remainder == value)
            add_now = min(len(inds), need_to_add)
            floored[rng.choice(inds, size=add_now, replace=False)] += 1
            need_to_add -= add_now
            if need_to_add == 0:
                break
    return floored.astype(int)


def fixed_split(
    y: np.ndarray, *, test_size: float | int, random_state: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Stratified train/test row indices; a fixed ``random_state`` plays the role of an official split."""
    from sklearn.model_selection import train_test_split

    idx = np.arange(len(y))
    try:
        tr, te = train_test_split(idx, test_size=test_size, stratify=y, random_state=random_state)
    except ValueError:
        tr, te = train_test_split(idx, test_size=test_size, random_state=random_state)
    return np.sort(tr), np.sort(te)


def standardize(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zero mean, unit variance per column with train statistics (constant columns become 0)."""
    mean = train.mean(0, dtype=np.float64).astype(np.float32)  # accumulate in float64, apply in float32
    std = train.std(0, dtype=np.float64).astype(np.float32)
    std[std == 0] = 1.0
    return ((train - mean) / std).astype(np.float32), ((test - mean) / std).astype(np.float32)


#: What ``VerticalDataset.fitted_features`` says of the fitted preprocessings here (one sample moves every row).
STANDARDISED = "standardised with the training rows' mean and std"
MIN_MAX = "min-max scaled with the training rows' min and max"
VOCABULARY = "category codes and embedding sizes from the training rows' vocabulary"


def minmax(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Scale each column to [0, 1] with the train min and max (test values may fall outside)."""
    low = train.min(0)
    span = train.max(0) - low
    span = np.where(span == 0, 1.0, span)
    return ((train - low) / span).astype(np.float32), ((test - low) / span).astype(np.float32)


def encode_categories(
    train: pd.DataFrame, test: pd.DataFrame
) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """Label-encode each column with the train vocabulary: codes 1..n, 0 for values unseen in train.

    Returns float32 code matrices (the :class:`PartySpec` convention) and, per column, the number of
    embedding indices it needs (n + 1, counting the reserved unknown index 0).
    """
    import pandas as pd

    tr_cols, te_cols, cards = [], [], []
    for col in train.columns:
        tr_values, te_values = _as_text(train[col]), _as_text(test[col])
        vocab = pd.Index(np.unique(tr_values))
        tr_cols.append(vocab.get_indexer(tr_values) + 1)
        te_cols.append(vocab.get_indexer(te_values) + 1)  # -1 (unseen) becomes the unknown index 0
        cards.append(len(vocab) + 1)
    return np.stack(tr_cols, 1).astype(np.float32), np.stack(te_cols, 1).astype(np.float32), tuple(cards)


def _as_text(column: pd.Series) -> np.ndarray:
    """Values as strings, a missing value being the empty string (a category of its own)."""
    return column.astype(object).where(column.notna(), "").astype(str).to_numpy()


def as_labels(values: pd.Series | np.ndarray) -> tuple[np.ndarray, int]:
    """Map class values (factor levels, strings or ints) to 0..k-1 in sorted/level order."""
    import pandas as pd

    cat = pd.Categorical(values)  # an R factor / pandas categorical keeps its level order
    return np.asarray(cat.codes, dtype=np.int64), len(cat.categories)


def build(
    name: str,
    train_parts: Sequence[np.ndarray | torch.Tensor],
    test_parts: Sequence[np.ndarray | torch.Tensor],
    y_train: np.ndarray,
    y_test: np.ndarray,
    *,
    num_classes: int,
    modality: Modality,
    fitted: str | Sequence[str],
    cardinalities: Sequence[tuple[int, ...]] | None = None,
    utility_metric: str | None = None,
) -> VerticalDataset:
    """Assemble a :class:`VerticalDataset` from per-party float arrays (party 0 = active); ``fitted``: each party's
    preprocessing fitted on the training rows ('' where none), one string for every party."""
    x_train = tuple(_float_tensor(p) for p in train_parts)
    x_test = tuple(_float_tensor(p) for p in test_parts)
    cards = cardinalities or [()] * len(x_train)
    specs = tuple(
        PartySpec(modality, tuple(x.shape[1:]), tuple(c)) for x, c in zip(x_train, cards, strict=True)
    )
    return VerticalDataset(
        name=name,
        x_train=x_train,
        y_train=torch.tensor(np.asarray(y_train, dtype=np.int64)),
        x_test=x_test,
        y_test=torch.tensor(np.asarray(y_test, dtype=np.int64)),
        num_classes=num_classes,
        specs=specs,
        utility_metric=utility_metric,
        fitted_features=(fitted,) * len(specs) if isinstance(fitted, str) else tuple(fitted),
    )


def unit_float(pixels: torch.Tensor) -> torch.Tensor:
    """uint8 pixels as contiguous float32 in [0, 1] (convert per party to avoid a full float copy)."""
    return pixels.contiguous().float().div_(255.0)


def _float_tensor(array: np.ndarray | torch.Tensor) -> torch.Tensor:
    if isinstance(array, torch.Tensor):
        return array.float().contiguous()
    array = np.ascontiguousarray(array, dtype=np.float32)
    return torch.from_numpy(array if array.flags.writeable else array.copy())
