"""CIFAR-10, ModelNet and BHI loaders on fixture pickle batches and PNG folders."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
import torch

from vflpriv.common.errors import ConfigError, DataError
from vflpriv.data import bhi, images


def _cifar(directory, per_batch=6):
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for name in (*images.CIFAR_TRAIN, "test_batch"):
        batch = {
            b"data": rng.integers(0, 256, (per_batch, 3072)).astype(np.uint8),
            b"labels": list(range(per_batch)),
        }
        protocol = pickle.HIGHEST_PROTOCOL if name == "test_batch" else 2  # CIFAR's own files are protocol 2
        (directory / name).write_bytes(pickle.dumps(batch, protocol=protocol))


def test_cifar10_halves_from_either_folder_layout(tmp_path):
    _cifar(tmp_path / "cifar-10-batches-py")
    ds = images.load_cifar10(root=tmp_path)
    assert [tuple(x.shape) for x in ds.x_train] == [(30, 3, 32, 16)] * 2
    assert ds.fitted_features == ("", "")  # pixels / 255: nothing fitted on the training rows (review fe F1)
    assert [tuple(x.shape) for x in ds.x_test] == [(6, 3, 32, 16)] * 2
    assert ds.y_train.tolist() == list(range(6)) * 5 and ds.num_classes == 10
    raw = pickle.loads((tmp_path / "cifar-10-batches-py" / "test_batch").read_bytes())[b"data"]
    full = torch.cat(ds.x_test, dim=-1)
    assert torch.allclose(full * 255, torch.from_numpy(raw.reshape(-1, 3, 32, 32)).float(), atol=1e-3)
    quads = images.load_cifar10(root=tmp_path / "cifar-10-batches-py", parties=4, max_samples=12, seed=0)
    assert [tuple(x.shape) for x in quads.x_train] == [(12, 3, 16, 16)] * 4


def test_cifar10_bad_batches_name_the_file(tmp_path):
    _cifar(tmp_path)
    (tmp_path / "data_batch_3").unlink()
    with pytest.raises(DataError, match=r"missing file .*data_batch_3; expected layout: cifar-10-batches-py"):
        images.load_cifar10(root=tmp_path)

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    (tmp_path / "data_batch_3").write_bytes(pickle.dumps({b"data": Evil()}))
    with pytest.raises(DataError, match=r"data_batch_3: not a readable pickle batch \(refusing to load"):
        images.load_cifar10(root=tmp_path)
    (tmp_path / "data_batch_3").write_bytes(
        pickle.dumps({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]})
    )
    with pytest.raises(DataError, match=r"data_batch_3: b'data' is not an n x 3072 array"):
        images.load_cifar10(root=tmp_path)


def _modelnet(writers, root, objects=(("chair", 3, 2), ("bed", 2, 1))):
    """Views are 8x8 grey squares of value 20 x view; chair uses MVCNN's names, bed the plain ones."""
    for cls, n_train, n_test in objects:
        for split, count in (("train", n_train), ("test", n_test)):
            for obj in range(count):
                for view in range(1, 13):
                    name = (
                        f"{cls}_{obj:04d}.obj.shaded_v{view:03d}.png"
                        if cls == "chair"
                        else f"{cls}_{obj:04d}_{view:03d}.png"
                    )
                    writers.png(root / cls / split / name, np.full((8, 8), 20 * view))


def test_modelnet_three_views_per_party(writers, tmp_path):
    _modelnet(writers, tmp_path)
    ds = images.load_modelnet(root=tmp_path, size=4)
    assert [tuple(x.shape) for x in ds.x_train] == [(5, 3, 4, 4)] * 4
    assert [tuple(x.shape) for x in ds.x_test] == [(3, 3, 4, 4)] * 4
    assert ds.num_classes == 2 and ds.y_train.tolist() == [0, 0, 1, 1, 1], "classes sorted: bed, chair"
    for k, part in enumerate(ds.x_train):
        views = [3 * k + c + 1 for c in range(3)]
        assert torch.allclose(
            part.mean(dim=(0, 2, 3)) * 255, torch.tensor([20.0 * v for v in views]), atol=0.6
        )
    two = images.load_modelnet(root=tmp_path, parties=2, classes=1, max_samples=1)
    assert [tuple(x.shape) for x in two.x_train] == [(1, 6, 32, 32)] * 2 and two.num_classes == 1
    with pytest.raises(ConfigError):
        images.load_modelnet(root=tmp_path, parties=5)


def test_modelnet_incomplete_object_names_it(writers, tmp_path):
    _modelnet(writers, tmp_path)
    (tmp_path / "bed" / "test" / "bed_0000_007.png").unlink()
    with pytest.raises(DataError, match=r"bed/test/bed_0000: views \[1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12\]"):
        images.load_modelnet(root=tmp_path)
    (tmp_path / "bed" / "test" / "bed_0000_007.png").write_bytes(b"not a png")
    with pytest.raises(DataError, match=r"cannot read .*bed_0000_007\.png: not a readable image"):
        images.load_modelnet(root=tmp_path)


def _bhi(writers, root, patients=5, per_label=(5, 4)):
    """Patch pixels encode (patient, label, file index) in the R, G, B channels."""
    for p in range(patients):
        for label, count in enumerate(per_label):
            for i in range(count):
                pixels = np.zeros((10, 10, 3))
                pixels[..., 0], pixels[..., 1], pixels[..., 2] = 40 * p + 10, 200 * label, 20 * i
                writers.png(
                    root / f"{8860 + p}" / str(label) / f"{8860 + p}_idx5_x{i}_y0_class{label}.png", pixels
                )


def test_bhi_pairs_one_patient_and_label_per_sample(writers, tmp_path):
    _bhi(writers, tmp_path / "IDC_regular_ps50_idx5")
    ds = bhi.load_bhi(root=tmp_path, size=10)
    assert ds.metric == "f1" and ds.num_classes == 2
    # 4 train patients x (2 pairs of label 0 + 2 of label 1); 1 test patient x 4 pairs (odd patch dropped)
    assert len(ds.y_train) == 16 and len(ds.y_test) == 4
    assert [tuple(x.shape) for x in ds.x_train] == [(16, 3, 10, 10)] * 2
    a, b = (torch.round(x[:, :, 0, 0] * 255) for x in ds.x_train)
    assert torch.equal(a[:, :2], b[:, :2]), "same patient and label in both parties"
    assert bool((a[:, 2] != b[:, 2]).all()), "two different patches"
    assert torch.equal((a[:, 1] / 200).long(), ds.y_train)
    test_patients = set(torch.round(ds.x_test[0][:, 0, 0, 0] * 255).tolist())
    assert len(test_patients) == 1 and not test_patients & set(a[:, 0].tolist()), "split by patient"
    again = bhi.load_bhi(root=tmp_path, size=10)
    other = bhi.load_bhi(root=tmp_path, size=10, seed=1)
    assert torch.equal(again.x_train[1], ds.x_train[1]) and not torch.equal(other.x_train[1], ds.x_train[1])
    capped = bhi.load_bhi(root=tmp_path / "IDC_regular_ps50_idx5", size=10, max_samples=6)
    assert torch.bincount(capped.y_train).tolist() == [3, 3]


def test_bhi_resizes_and_names_bad_files(writers, tmp_path):
    _bhi(writers, tmp_path, patients=2, per_label=(2, 2))
    assert tuple(bhi.load_bhi(root=tmp_path, size=50).x_test[0].shape[1:]) == (3, 50, 50)
    bad = tmp_path / "8860" / "1" / "8860_idx5_x0_y0_class1.png"
    bad.write_bytes(b"\x89PNG broken")
    with pytest.raises(DataError, match=r"cannot read .*8860_idx5_x0_y0_class1\.png"):
        bhi.load_bhi(root=tmp_path)
    with pytest.raises(DataError, match=r"bhi: cannot find \*/\[01\]/\*\.png"):
        bhi.load_bhi(root=tmp_path / "nowhere")
