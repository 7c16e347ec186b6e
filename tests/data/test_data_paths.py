"""Data directories, the missing-file message, the streaming CSV sampler and the download script."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from vflpriv.common.errors import DataError
from vflpriv.data import paths
from vflpriv.data.readers import read_table

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "get-datasets.sh"


def test_data_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("VFLPRIV_DATA", str(tmp_path))
    assert paths.data_root() == tmp_path
    monkeypatch.delenv("VFLPRIV_DATA")
    assert paths.data_root() == Path.home() / ".local" / "share" / "vflpriv"


def test_search_order_data_root_then_unpacked_then_system_and_a_given_root_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "SYSTEM_ROOT", Path("/"))  # the machine's own (the fixture hides it from the loaders)
    root = paths.data_root()
    assert paths.candidate_dirs("fashion-mnist") == [
        root / "fashion-mnist",
        root / "usr/share/datasets/fashion-mnist",
        Path("/usr/share/datasets/fashion-mnist"),
    ]
    assert paths.candidate_dirs("fashion-mnist", tmp_path / "mine") == [tmp_path / "mine"]  # never other files
    assert paths.candidate_dirs("avazu") == [root / "avazu"]


def test_locate_finds_globs_and_names_the_missing_file(tmp_path, monkeypatch):
    monkeypatch.setitem(paths.SYSTEM_DIRS, "letter", (tmp_path / "not-installed",))
    (tmp_path / "a" / "train").mkdir(parents=True)
    (tmp_path / "a" / "train" / "x.png").write_bytes(b"")
    directory, found = paths.locate("modelnet", tmp_path, ("*/train/*.png",), "LAYOUT")
    assert directory == tmp_path and found.name == "x.png"
    with pytest.raises(DataError, match=r"avazu: cannot find train\.csv in dataset\.root .*layout: LAYOUT\) or leave"):
        paths.locate("avazu", tmp_path, ("train.csv",), "LAYOUT")
    with pytest.raises(DataError, match=r"get-datasets\.sh"):
        paths.locate("letter", None, ("LetterRecognition.rda",), "LAYOUT")


def test_a_given_root_without_the_files_is_refused_even_where_the_dataset_is_installed(tmp_path, monkeypatch):
    monkeypatch.setitem(paths.SYSTEM_DIRS, "letter", (tmp_path / "installed",))
    monkeypatch.setattr(paths, "SYSTEM_ROOT", Path("/"))
    (tmp_path / "installed").mkdir()
    (tmp_path / "installed" / "LetterRecognition.rda").write_bytes(b"")
    assert paths.locate("letter", None, ("LetterRecognition.rda",), "L")[0] == tmp_path / "installed"
    with pytest.raises(DataError, match="in dataset.root"):
        paths.locate("letter", tmp_path / "empty", ("LetterRecognition.rda",), "L")


def test_read_table_sample_is_seeded_and_independent_of_chunk_size(tmp_path):
    path = tmp_path / "t.csv"
    pd.DataFrame({"a": np.arange(1000), "b": np.arange(1000) * 2}).to_csv(path, index=False)
    kw = {"dataset": "t", "layout": "L"}
    small = read_table(path, max_rows=50, seed=3, chunk_rows=7, **kw)
    large = read_table(path, max_rows=50, seed=3, chunk_rows=10_000, **kw)
    other = read_table(path, max_rows=50, seed=4, **kw)
    assert len(small) == 50 and small.equals(large)
    assert small["a"].is_monotonic_increasing and (small["b"] == 2 * small["a"]).all()
    assert not small.equals(other)
    assert len(read_table(path, max_rows=5000, seed=0, **kw)) == 1000


def test_read_table_names_a_corrupt_file(tmp_path):
    path = tmp_path / "t.csv.gz"
    path.write_bytes(b"not gzip at all")
    with pytest.raises(DataError, match=r"cannot read .*t\.csv\.gz"):
        read_table(path, dataset="t", layout="L")


def test_get_datasets_script_help_and_bad_option():
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0
    shown = subprocess.run(["bash", str(SCRIPT), "--help"], capture_output=True, text=True)
    assert shown.returncode == 0 and "--system" in shown.stdout
    bad = subprocess.run(["bash", str(SCRIPT), "--nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("error:")


def test_a_dataset_made_from_another_s_files_is_searched_and_got_as_that_one():
    assert paths.candidate_dirs("fashion-mnist-views") == paths.candidate_dirs("fashion-mnist")
    assert paths.how_to_get("fashion-mnist-views", "L") == paths.how_to_get("fashion-mnist", "L")
