"""Avazu and Criteo loaders on fixture CSV/TSV files in the Kaggle formats."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from vflpriv.common.errors import ConfigError, DataError
from vflpriv.data import ctr

AVAZU_COLUMNS = [
    "id", "click", "hour", "C1", "banner_pos", "site_id", "site_domain", "site_category", "app_id",
    "app_domain", "app_category", "device_id", "device_ip", "device_model", "device_type",
    "device_conn_type", "C14", "C15", "C16", "C17", "C18", "C19", "C20", "C21",
]  # fmt: skip


def _avazu(n, seed=0):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({c: rng.integers(0, 4, n) for c in AVAZU_COLUMNS})
    for c in ("site_id", "site_domain", "app_id", "device_id", "device_ip", "device_model"):
        frame[c] = [f"{c}-{v:x}" for v in rng.integers(0, 6, n)]
    frame["id"] = np.arange(n)
    frame["click"] = (np.arange(n) % 3 == 0).astype(int)
    frame["C15"] = rng.choice([320, 300, 728], n)
    return frame


def test_avazu_field_split_codes_and_scaling(tmp_path):
    _avazu(60).to_csv(tmp_path / "train.csv", index=False)
    ds = ctr.load_avazu(root=tmp_path)
    assert len(ds.y_train) == 50 and len(ds.y_test) == 10, "train split 5:1"
    assert [tuple(x.shape) for x in ds.x_train] == [(50, 10), (50, 11)]
    assert [s.n_categorical for s in ds.specs] == [7, 7] and ds.metric == "auc"
    assert ds.fitted_features == (f"{ctr.VOCABULARY}; {ctr.MIN_MAX}",) * 2  # review fe F1: no feature epsilon
    for x_tr, x_te, spec in zip(ds.x_train, ds.x_test, ds.specs, strict=True):
        cards = torch.tensor(spec.cardinalities, dtype=torch.float32)
        codes = x_tr[:, : spec.n_categorical]
        assert bool((codes >= 1).all() and (codes < cards).all()), "train values get 1..n"
        assert bool((x_te[:, : spec.n_categorical] < cards).all())
        dense = x_tr[:, spec.n_categorical :]
        assert float(dense.min()) == 0.0 and float(dense.max()) == 1.0
    # the active party's first dense field is C15, drawn from {300, 320, 728}
    assert sorted(set(ds.x_train[0][:, 7].tolist())) == pytest.approx([0.0, 20 / 428, 1.0])


def test_avazu_unknown_test_values_get_index_zero(tmp_path):
    train, test = _avazu(30), _avazu(12, seed=1)
    test.loc[:5, "device_ip"] = "never-seen"
    train.to_csv(tmp_path / "train.csv", index=False)
    test.to_csv(tmp_path / "test.csv", index=False)
    ds = ctr.load_avazu(root=tmp_path)
    assert len(ds.y_train) == 30 and len(ds.y_test) == 12, "test.csv used as given"
    assert ds.x_test[0][:6, 0].tolist() == [0.0] * 6
    ips = sorted(train["device_ip"].unique())
    assert ds.specs[0].cardinalities[0] == len(ips) + 1
    expected = [ips.index(v) + 1 for v in train["device_ip"]]
    assert ds.x_train[0][:, 0].tolist() == expected


def test_avazu_max_samples_with_the_seed(tmp_path):
    _avazu(200).to_csv(tmp_path / "train.csv", index=False)
    a = ctr.load_avazu(root=tmp_path, max_samples=40, seed=3)
    b = ctr.load_avazu(root=tmp_path, max_samples=40, seed=3)
    c = ctr.load_avazu(root=tmp_path, max_samples=40, seed=4)
    assert len(a.y_train) == 40 and len(a.y_test) == 8, "test capped in the papers' 5:1 proportion"
    assert torch.equal(a.x_train[1], b.x_train[1]) and not torch.equal(a.x_train[1], c.x_train[1])


def test_avazu_bad_files_name_the_file(tmp_path):
    with pytest.raises(DataError, match=r"avazu: cannot find train\.csv or train\.csv\.gz"):
        ctr.load_avazu(root=tmp_path)
    _avazu(20).drop(columns="device_ip").to_csv(tmp_path / "train.csv", index=False)
    with pytest.raises(DataError, match=r"cannot read .*train\.csv.*device_ip"):
        ctr.load_avazu(root=tmp_path)
    frame = _avazu(20)
    frame.loc[3, "click"] = 7
    frame.to_csv(tmp_path / "train.csv", index=False)
    with pytest.raises(DataError, match=r"train\.csv: column click must hold only 0 and 1"):
        ctr.load_avazu(root=tmp_path)
    with pytest.raises(ConfigError):
        ctr.load_avazu(root=tmp_path, parties=3)


def _criteo(path, n):
    rng = np.random.default_rng(0)
    lines = []
    for i in range(n):
        ints = [["", "-2", "0", "9", "99"][i % 5]] + [
            str(v) if v != 5 else "" for v in rng.integers(-2, 50, 12)
        ]
        cats = [f"{v:08x}" if v else "" for v in rng.integers(0, 5, 26)]
        lines.append("\t".join([str(int(i % 4 == 0)), *ints, *cats]))
    path.write_text("\n".join(lines) + "\n")


def test_criteo_active_categorical_passive_numeric(tmp_path):
    _criteo(tmp_path / "train.txt", 45)
    ds = ctr.load_criteo(root=tmp_path)
    assert len(ds.y_train) == 40 and len(ds.y_test) == 5, "split 8:1"
    assert [tuple(x.shape) for x in ds.x_train] == [(40, 26), (40, 13)]
    assert ds.specs[0].n_categorical == 26 and ds.specs[1].n_categorical == 0
    assert ds.fitted_features == (ctr.VOCABULARY, ctr.MIN_MAX)  # review fe F1: what each party's features pass
    assert all(c == 6 for c in ds.specs[0].cardinalities), "5 values + missing, plus unknown index 0"
    numeric = ds.x_train[1]
    assert float(numeric.min()) == 0.0 and float(numeric.max()) == 1.0
    # I1 cycles through missing, -2, 0, 9, 99: missing and negatives count as 0, then log(1 + x)
    # min-max scaled: log(10) / log(100) = 0.5 (a linear scaling would give 0.09)
    assert sorted(set(numeric[:, 0].tolist())) == pytest.approx([0.0, 0.5, 1.0])
    assert not torch.isnan(numeric).any()
    assert set(ds.y_train.tolist()) == {0, 1}


def test_criteo_max_samples_and_bad_label(tmp_path):
    _criteo(tmp_path / "train.txt", 90)
    ds = ctr.load_criteo(root=tmp_path, max_samples=16, seed=2)
    assert len(ds.y_train) == 16 and len(ds.y_test) == 2
    (tmp_path / "train.txt").write_text("3\t" + "\t".join(["1"] * 13 + ["a"] * 26) + "\n")
    with pytest.raises(DataError, match=r"train\.txt: column label must hold only 0 and 1"):
        ctr.load_criteo(root=tmp_path)
