"""Benchmark loaders: Fashion-MNIST on fixture IDX files, all three on the real Debian files if present."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from vflpriv.common.errors import ConfigError, DataError
from vflpriv.data import benchmark
from vflpriv.data.catalog import status
from vflpriv.data.paths import data_root
from vflpriv.data.readers import read_rda


def _fashion(writers, directory, n_train=40, n_test=10):
    rng = np.random.default_rng(0)
    arrays = {
        "train-images-idx3-ubyte.gz": rng.integers(0, 256, (n_train, 4, 4)),
        "train-labels-idx1-ubyte.gz": np.arange(n_train) % 10,
        "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (n_test, 4, 4)),
        "t10k-labels-idx1-ubyte.gz": np.arange(n_test) % 10,
    }
    for name, array in arrays.items():
        writers.idx(directory / name, array)
    return arrays


def test_fashion_mnist_halves_quadrants_and_scaling(writers, tmp_path):
    arrays = _fashion(writers, tmp_path)
    ds = benchmark.load_fashion_mnist(parties=2, root=tmp_path)
    assert [tuple(x.shape) for x in ds.x_train] == [(40, 1, 4, 2)] * 2
    assert [tuple(x.shape) for x in ds.x_test] == [(10, 1, 4, 2)] * 2
    full = torch.cat(ds.x_train, dim=-1)
    assert torch.allclose(full[:, 0] * 255, torch.from_numpy(arrays["train-images-idx3-ubyte.gz"]).float())
    assert ds.y_train.tolist() == (np.arange(40) % 10).tolist() and ds.num_classes == 10
    quads = benchmark.load_fashion_mnist(parties=4, root=tmp_path)
    assert [tuple(x.shape[1:]) for x in quads.x_train] == [(1, 2, 2)] * 4
    assert quads.fitted_features == ("",) * 4  # pixels / 255: nothing fitted on the training rows (review fe F1)
    assert all(float(x.min()) >= 0 and float(x.max()) <= 1 for x in quads.x_train)
    with pytest.raises(ConfigError):
        benchmark.load_fashion_mnist(parties=3, root=tmp_path)


def test_fashion_mnist_found_unpacked_in_the_data_root(writers):
    _fashion(writers, data_root() / "usr/share/datasets/fashion-mnist")
    assert len(benchmark.load_fashion_mnist().y_test) == 10


def test_fashion_mnist_max_samples_is_stratified_and_seeded(writers, tmp_path):
    _fashion(writers, tmp_path)
    a = benchmark.load_fashion_mnist(root=tmp_path, max_samples=20, seed=1)
    b = benchmark.load_fashion_mnist(root=tmp_path, max_samples=20, seed=1)
    c = benchmark.load_fashion_mnist(root=tmp_path, max_samples=20, seed=2)
    assert len(a.y_train) == 20 and torch.bincount(a.y_train).tolist() == [2] * 10
    assert torch.equal(a.x_train[0], b.x_train[0]) and not torch.equal(a.x_train[0], c.x_train[0])
    assert len(a.y_test) == 10


def test_fashion_mnist_missing_and_corrupt_files_name_the_file(writers, tmp_path):
    _fashion(writers, tmp_path)
    (tmp_path / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(DataError, match=r"missing file .*t10k-labels-idx1-ubyte\.gz"):
        benchmark.load_fashion_mnist(root=tmp_path)
    writers.idx(tmp_path / "t10k-labels-idx1-ubyte.gz", np.arange(7))
    with pytest.raises(DataError, match=r"t10k-labels-idx1-ubyte\.gz: expected 10 labels"):
        benchmark.load_fashion_mnist(root=tmp_path)
    (tmp_path / "train-images-idx3-ubyte.gz").write_bytes(b"garbage")
    with pytest.raises(DataError, match=r"cannot read .*train-images-idx3-ubyte\.gz: not a readable gzip"):
        benchmark.load_fashion_mnist(root=tmp_path)


def test_corrupt_rda_names_the_file(tmp_path):
    pytest.importorskip("rdata")
    (tmp_path / "Satellite.rda").write_bytes(b"RDX3\nnot really")
    with pytest.raises(DataError, match=r"cannot read .*Satellite\.rda"):
        benchmark.load_satellite(root=tmp_path)


def test_satellite_columns_follow_the_documented_pixel_band_order():
    assert benchmark.satellite_columns((0,)) == [0, 4, 8, 12, 16, 20, 24, 28, 32]
    assert benchmark.satellite_columns((2, 3))[:2] == [2, 6] and benchmark.satellite_columns((2, 3))[9] == 3


def _need(name):
    present, _, how = status(name)
    if not present:
        pytest.skip(f"{name} files absent: {how}")
    if name != "fashion-mnist":
        pytest.importorskip("rdata")


@pytest.mark.real_data
def test_real_letter():
    _need("letter")
    ds = benchmark.load_letter(parties=4)
    assert [tuple(x.shape) for x in ds.x_train] == [(16000, 4)] * 4 and len(ds.y_test) == 4000
    assert ds.fitted_features == (benchmark.STANDARDISED,) * 4  # review fe F1: no feature epsilon on them
    assert ds.num_classes == 26 and set(ds.y_train.tolist()) == set(range(26))
    train = torch.cat(ds.x_train, 1)
    assert torch.allclose(train.mean(0), torch.zeros(16), atol=1e-5), "standardised on train"
    assert torch.allclose(train.std(0, unbiased=False), torch.ones(16), atol=1e-4)
    assert not torch.allclose(torch.cat(ds.x_test, 1).mean(0), torch.zeros(16), atol=1e-4)
    capped = benchmark.load_letter(max_samples=2600, seed=5)
    counts = torch.bincount(capped.y_train)
    assert counts.sum() == 2600 and int(counts.min()) >= 90 and int(counts.max()) <= 110, "stratified"


@pytest.mark.real_data
def test_real_satellite_split_by_band():
    _need("satellite")
    one = benchmark.load_satellite(parties=1)
    two = benchmark.load_satellite(parties=2)
    four = benchmark.load_satellite(parties=4)
    assert len(one.y_train) == 4435 and len(one.y_test) == 2000 and one.num_classes == 6
    assert [tuple(x.shape) for x in two.x_train] == [(4435, 18)] * 2
    assert [tuple(x.shape) for x in four.x_train] == [(4435, 9)] * 4
    frame = read_rda(
        Path(status("satellite")[1]) / "Satellite.rda", "Satellite", dataset="satellite", layout=""
    )
    raw = frame.iloc[:4435, :36].to_numpy(np.float64)
    scaled = torch.from_numpy((raw - raw.mean(0)) / raw.std(0)).float()
    for band, part in enumerate(four.x_train):  # band b of pixel p is x.(4p + b + 1)
        assert torch.allclose(part, scaled[:, [4 * p + band for p in range(9)]], atol=1e-5)
    assert torch.equal(two.x_train[1], torch.cat(four.x_train[2:], 1))
    assert torch.equal(one.x_train[0], torch.cat(four.x_train, 1))
    assert one.y_train[:3].tolist() == [2, 2, 2]  # sat.trn starts with three grey-soil rows


@pytest.mark.real_data
def test_real_fashion_mnist():
    _need("fashion-mnist")
    ds = benchmark.load_fashion_mnist(parties=4, max_samples=1000)
    assert [tuple(x.shape) for x in ds.x_train] == [(1000, 1, 14, 14)] * 4
    assert len(ds.y_test) == 10000 and torch.bincount(ds.y_train).tolist() == [100] * 10


def test_fashion_mnist_views_gives_every_party_a_full_view_of_the_same_items(writers, tmp_path):
    _fashion(writers, tmp_path)
    ds = benchmark.load_fashion_mnist_views(parties=3, root=tmp_path)
    plain = benchmark.load_fashion_mnist(parties=1, root=tmp_path)
    assert [tuple(x.shape) for x in ds.x_train] == [(40, 1, 4, 4)] * 3 and len(ds.x_test) == 3
    assert torch.equal(ds.y_train, plain.y_train) and torch.equal(ds.y_test, plain.y_test)
    assert not torch.equal(ds.x_train[0], ds.x_train[1]) and not torch.equal(ds.x_train[0], plain.x_train[0])
    again = benchmark.load_fashion_mnist_views(parties=3, root=tmp_path)
    assert all(torch.equal(a, b) for a, b in zip(ds.x_train, again.x_train))  # fixed data, not a fresh draw
    assert all(float(x.min()) >= 0 and float(x.max()) <= 1 for x in ds.x_train)


def test_a_camera_at_full_scale_without_rotation_or_shift_sees_the_image_itself(monkeypatch):
    from vflpriv.data import splits

    monkeypatch.setattr(splits, "VIEW_SCALE", (1.0, 1.0))
    monkeypatch.setattr(splits, "VIEW_ROTATION", 0.0)
    images = torch.rand(5, 1, 6, 6, generator=torch.Generator().manual_seed(0))
    (view,) = splits.image_views(images, 1, seed=0)
    assert torch.allclose(view, images, atol=1e-6)


def test_a_camera_zooms_into_the_image_and_each_party_has_its_own():
    from vflpriv.data.splits import image_views

    images = torch.zeros(200, 1, 16, 16)
    images[:, :, :2, :] = 1.0  # a bright band along the top edge
    a, b = image_views(images, 2, seed=0)
    assert a[:, :, :2, :].mean() < 0.9  # zoomed in: the band is mostly out of frame or moved
    assert not torch.equal(a, b)
