"""The dataset catalog: every registered built-in is described, and status() tells where or how to get it."""

from __future__ import annotations

import inspect

import pytest

from vflpriv.common.errors import UnknownNameError
from vflpriv.config.registry import DATASETS
from vflpriv.data.catalog import DATASET_INFO, status
from vflpriv.data.paths import data_root


def test_every_registered_builtin_is_in_the_catalog_and_loadable_by_name():
    builtin = [n for n in DATASETS.names() if DATASETS.get(n).__module__.startswith("vflpriv.data.")]
    assert set(builtin) == set(DATASET_INFO)
    for name in builtin:
        params = inspect.signature(DATASETS.get(name)).parameters
        assert {"parties", "root", "max_samples", "seed"} <= set(params)
        assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())


def test_status_of_embedded_benchmark_and_user_supplied():
    assert status("digits")[0] is True
    for name in ("avazu", "modelnet", "nus-wide"):
        present, where, how = status(name)
        assert not present and where is None and str(data_root() / name) in how and "layout:" in how
    assert "bash scripts/get-datasets.sh" in status("satellite")[2]
    with pytest.raises(UnknownNameError, match="known datasets: digits"):
        status("imagenet")


def test_status_finds_files_in_the_data_root():
    directory = data_root() / "criteo"
    directory.mkdir(parents=True)
    (directory / "dac_sample.txt").write_text("")
    assert status("criteo")[:2] == (True, str(directory))
    unpacked = data_root() / "usr/share/datasets/fashion-mnist"
    unpacked.mkdir(parents=True)
    (unpacked / "train-images-idx3-ubyte.gz").write_bytes(b"")
    assert status("fashion-mnist")[:2] == (True, str(unpacked))
