"""NUS-WIDE loaders on fixture files written in the official full and Lite layouts."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from vflpriv.common.errors import ConfigError, DataError
from vflpriv.data import nuswide


def _write(writers, root, layout, split, n, rng):
    """Write one split; rows 0 and 1 have no / two concepts and must be dropped."""
    onehot = np.zeros((n, 10), dtype=int)
    onehot[np.arange(2, n), np.arange(2, n) % 10] = 1
    onehot[1, [0, 3]] = 1
    for c, concept in enumerate(nuswide.CONCEPTS):
        writers.matrix(root / layout.label.format(concept=concept, split=split), onehot[:, [c]], "\n", "%d")
    blocks = []
    for i, (name, width) in enumerate(nuswide.FEATURES):
        block = rng.normal(10 * i, 1 + i, (n, width))
        writers.matrix(root / layout.feature.format(name=name, split=split), block, " ", "%.6f")
        blocks.append(block)
    tags = rng.integers(0, 2, (n, nuswide.N_TAGS))
    writers.matrix(root / layout.tags.format(split=split), tags, "\t", "%d")
    keep = slice(2, n)
    return np.hstack(blocks)[keep], tags[keep], onehot[keep].argmax(1)


def _fixture(writers, root, layout=nuswide.FULL):
    rng = np.random.default_rng(0)
    train = _write(writers, root, layout, "Train", 24, rng)
    test = _write(writers, root, layout, "Test", 12, rng)
    return train, test


@pytest.mark.parametrize(
    "layout,load", [(nuswide.FULL, nuswide.load_nus_wide), (nuswide.LITE, nuswide.load_nus_wide_lite)]
)
def test_parties_labels_and_train_only_standardisation(writers, tmp_path, layout, load):
    (img_tr, tag_tr, y_tr), (img_te, tag_te, y_te) = _fixture(writers, tmp_path, layout)
    ds = load(root=tmp_path)
    assert [tuple(x.shape) for x in ds.x_train] == [(22, 634), (22, 1000)]
    assert [tuple(x.shape) for x in ds.x_test] == [(10, 634), (10, 1000)]
    assert ds.y_train.tolist() == y_tr.tolist() and ds.y_test.tolist() == y_te.tolist()
    assert ds.num_classes == 10 and ds.metric == "accuracy"
    assert ds.fitted_features == (nuswide.STANDARDISED,) * 2  # review fe F1: no feature epsilon on them
    mean, std = img_tr.mean(0), img_tr.std(0)
    assert torch.allclose(ds.x_train[0], torch.from_numpy((img_tr - mean) / std).float(), atol=1e-4)
    assert torch.allclose(ds.x_test[0], torch.from_numpy((img_te - mean) / std).float(), atol=1e-4)
    t_mean, t_std = tag_tr.mean(0), tag_tr.std(0)
    t_std[t_std == 0] = 1
    assert torch.allclose(ds.x_test[1], torch.from_numpy((tag_te - t_mean) / t_std).float(), atol=1e-4)


def test_feature_blocks_are_concatenated_in_the_documented_order(writers, tmp_path):
    (img_tr, _, _), _ = _fixture(writers, tmp_path)
    ds = nuswide.load_nus_wide(root=tmp_path)
    widths = np.cumsum([0] + [w for _, w in nuswide.FEATURES])
    assert widths[-1] == 634
    for i, (start, stop) in enumerate(itertools.pairwise(widths)):
        raw = img_tr[:, start:stop]
        assert np.allclose(raw.mean(), 10 * i, atol=1.5), "fixture block i has mean 10 i"
        expected = (raw - raw.mean(0)) / raw.std(0)
        assert torch.allclose(ds.x_train[0][:, start:stop], torch.from_numpy(expected).float(), atol=1e-4)


def test_max_samples_caps_train_rows_with_the_seed(writers, tmp_path):
    _fixture(writers, tmp_path)
    a = nuswide.load_nus_wide(root=tmp_path, max_samples=10, seed=1)
    b = nuswide.load_nus_wide(root=tmp_path, max_samples=10, seed=1)
    assert len(a.y_train) == 10 and len(a.y_test) == 10
    assert torch.equal(a.x_train[1], b.x_train[1]) and torch.equal(a.y_train, b.y_train)


def test_missing_and_corrupt_files_name_the_file(writers, tmp_path):
    _fixture(writers, tmp_path)
    (tmp_path / "Low_Level_Features" / "Test_Normalized_WT.dat").unlink()
    with pytest.raises(
        DataError, match=r"missing file .*Test_Normalized_WT\.dat; expected layout: Low_Level"
    ):
        nuswide.load_nus_wide(root=tmp_path)
    writers.matrix(
        tmp_path / "Low_Level_Features" / "Test_Normalized_WT.dat", np.ones((12, 127)), " ", "%.1f"
    )
    with pytest.raises(DataError, match=r"Test_Normalized_WT\.dat: expected 128 columns, found 127"):
        nuswide.load_nus_wide(root=tmp_path)
    writers.matrix(
        tmp_path / "Low_Level_Features" / "Test_Normalized_WT.dat", np.ones((11, 128)), " ", "%.1f"
    )
    with pytest.raises(DataError, match=r"Test_Normalized_WT\.dat: 11 rows but the labels have 12"):
        nuswide.load_nus_wide(root=tmp_path)
    with pytest.raises(
        DataError, match=r"nus-wide-lite: cannot find NUS-WIDE-Lite_tags/Lite_Tags1k_Train\.txt"
    ):
        nuswide.load_nus_wide_lite(root=tmp_path)
    with pytest.raises(ConfigError):
        nuswide.load_nus_wide(root=tmp_path, parties=3)
