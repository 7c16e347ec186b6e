"""scikit-learn's bundled datasets read and split without importing scikit-learn (``vflpriv.data.bundled``): the
same arrays as scikit-learn's loaders, the same split as its ``train_test_split(..., stratify=y, random_state=0)``,
and a cold load that never imports it."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest

from vflpriv.data import bundled
from vflpriv.data.prep import cap_rows, stratified_split


@pytest.mark.parametrize(("name", "loader"), [("digits", "load_digits"), ("breast-cancer", "load_breast_cancer")])
def test_the_files_read_as_scikit_learns_loaders_read_them(name, loader):
    import sklearn.datasets

    bunch = getattr(sklearn.datasets, loader)()
    data, target = bundled.read(name)
    assert data.dtype == bunch.data.dtype and target.dtype == bunch.target.dtype
    assert np.array_equal(data, bunch.data) and np.array_equal(target, bunch.target)


def _labels():
    rng = np.random.RandomState(5)
    return {
        "digits": bundled.read("digits")[1],
        "breast-cancer": bundled.read("breast-cancer")[1],
        # uneven classes whose shares tie in their remainders: the tie-breaking draws matter
        "ties": np.repeat(np.arange(7), [3, 3, 3, 5, 5, 8, 21])[rng.permutation(48)],
        "strings": np.array(list("abcab") * 9),
    }


@pytest.mark.parametrize("labels", ["digits", "breast-cancer", "ties", "strings"])
@pytest.mark.parametrize(("fraction", "seed"), [(0.2, 0), (0.33, 0), (0.25, 7)])
def test_the_split_is_scikit_learns_stratified_split(labels, fraction, seed):
    from sklearn.model_selection import train_test_split

    y = _labels()[labels]
    rows = np.arange(len(y))
    want_train, want_test = train_test_split(rows, test_size=fraction, stratify=y, random_state=seed)
    n_test = math.ceil(fraction * len(y))
    train, test = stratified_split(y, n_train=len(y) - n_test, n_test=n_test, seed=seed)
    assert np.array_equal(train, want_train) and np.array_equal(test, want_test)


@pytest.mark.parametrize(("labels", "keep", "seed"), [("digits", 500, 0), ("digits", 11, 3), ("ties", 20, 1),
                                                      ("ties", 6, 0), ("breast-cancer", 100, 2)])
def test_capping_rows_draws_scikit_learns_rows_or_its_fallback(labels, keep, seed):
    """``cap_rows``: scikit-learn's stratified ``train_size`` draw, and where scikit-learn refuses to stratify (6 rows
    of 7 classes) the same unstratified fallback as before."""
    from sklearn.model_selection import train_test_split

    y = _labels()[labels]
    try:
        want, _ = train_test_split(np.arange(len(y)), train_size=keep, stratify=y, random_state=seed)
    except ValueError:
        want = np.random.default_rng(seed).choice(len(y), keep, replace=False)
    assert np.array_equal(cap_rows(y, keep, seed=seed), np.sort(want))


def test_a_class_of_one_row_is_refused_as_scikit_learn_refuses_it():
    with pytest.raises(ValueError):
        stratified_split(np.array([0, 0, 1, 1, 1, 2]), n_train=4, n_test=2, seed=0)


def test_a_cold_load_imports_no_scikit_learn_and_gives_what_scikit_learns_split_gave(tmp_path):
    """The digits of a cold cache, loaded in a fresh process, against the loader as it was (scikit-learn's
    ``load_digits`` and ``train_test_split``), max_samples capping included."""
    import torch
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    from vflpriv.data.splits import image_parts

    code = ("import sys, torch; from vflpriv.config.schema import DatasetConfig; from vflpriv.data.load import "
            "load_dataset\nd = load_dataset(DatasetConfig(name='digits', max_samples=500), parties=4)\n"
            "assert 'sklearn' not in sys.modules, 'scikit-learn imported'\ntorch.save(d.payload(), sys.argv[1])")
    env = {**os.environ, "VFLPRIV_CACHE": str(tmp_path / "empty")}
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "d.pt")], check=True, env=env)
    got = torch.load(tmp_path / "d.pt", weights_only=True)
    bunch = load_digits()
    x_tr, x_te, y_tr, y_te = train_test_split(bunch.images.astype(np.float32)[:, None] / 16.0, bunch.target,
                                              test_size=0.2, stratify=bunch.target, random_state=0)
    keep = cap_rows(y_tr, 500, seed=0)
    want = [*image_parts(torch.from_numpy(x_tr[keep]), 4), torch.from_numpy(y_tr[keep]).long(),
            *image_parts(torch.from_numpy(x_te), 4), torch.from_numpy(y_te).long()]
    tensors = [*got["x_train"], got["y_train"], *got["x_test"], got["y_test"]]
    assert len(tensors) == len(want) and all(a.dtype == b.dtype and torch.equal(a, b) for a, b in zip(tensors, want))
