"""Datasets bundled with scikit-learn are cached as verified tensor entries: a later process loads them
without scikit-learn, gets the same tensors, and a corrupt entry is discarded and recomputed."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from vflpriv.config.schema import DatasetConfig
from vflpriv.data import load
from vflpriv.store import cache


def _fresh(name: str = "digits", parties: int = 2, max_samples: int | None = None):
    load._load.cache_clear()  # as a new process would
    return load.load_dataset(DatasetConfig(name=name, max_samples=max_samples), parties=parties)


def _same(a, b) -> bool:
    tensors = lambda d: [*d.x_train, d.y_train, *d.x_test, d.y_test]  # noqa: E731
    return a.specs == b.specs and a.num_classes == b.num_classes and all(
        torch.equal(x, y) for x, y in zip(tensors(a), tensors(b)))


def _entries():
    return sorted((cache.cache_root() / "datasets").glob("*.entry"))


def test_a_cached_dataset_is_the_loaded_one_and_needs_no_scikit_learn():
    first = _fresh()
    assert len(_entries()) == 1
    assert _same(_fresh(), first)
    code = ("import sys; from vflpriv.config.schema import DatasetConfig; from vflpriv.data.load import load_dataset\n"
            "d = load_dataset(DatasetConfig(name='digits'), parties=2)\n"
            "print('sklearn' in sys.modules, d.x_train[0].shape[0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", str(first.x_train[0].shape[0])]


def test_every_split_has_its_own_entry():
    a, b, c = _fresh(), _fresh(parties=4), _fresh(max_samples=300)
    assert len(_entries()) == 3
    assert b.parties == 4 and c.x_train[0].shape[0] == 300 and a.x_train[0].shape[0] > 300


@pytest.mark.parametrize("corrupt", [
    lambda p: p.write_bytes(p.read_bytes()[:-100]),  # truncated
    lambda p: cache.write_entry(p, b"not a torch file"),  # checksum right, payload wrong
    lambda p: cache.write_entry(p, _payload_with_rows_dropped()),  # consistent file, inconsistent dataset
])
def test_a_corrupt_dataset_entry_is_discarded_and_recomputed(corrupt):
    first = _fresh("breast-cancer")
    (path,) = _entries()
    corrupt(path)
    with pytest.warns(UserWarning, match="discarded and recomputed"):
        again = _fresh("breast-cancer")
    assert _same(again, first)
    assert _same(_fresh("breast-cancer"), first)  # the entry was rewritten whole


def _payload_with_rows_dropped() -> bytes:
    import io

    data = load.load_dataset(DatasetConfig(name="breast-cancer"), parties=2).payload()
    data["y_train"] = data["y_train"][:-1]
    buffer = io.BytesIO()
    torch.save(data, buffer)
    return buffer.getvalue()


def test_an_unwritable_cache_only_means_loading_the_slow_way(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache folder should be")
    monkeypatch.setenv(cache.ENV_VAR, str(blocked))
    assert _fresh().x_train[0].shape[0] > 0


def test_an_entry_of_another_data_file_is_not_used(tmp_path, monkeypatch):
    """The entry is keyed by the digest of the file it was made from: where scikit-learn's file changes (another
    release's data), the cached tensors of the old file are stale and the dataset is read again."""
    import gzip

    from vflpriv.data import bundled

    first = _fresh()
    changed = tmp_path / "digits.csv.gz"
    with gzip.open(bundled.data_file("digits"), "rt") as f:
        rows = f.read().splitlines()
    rows = [",".join(["16"] * 64 + [r.split(",")[-1]]) for r in rows]  # every pixel at its maximum
    changed.write_bytes(gzip.compress("\n".join(rows).encode()))
    monkeypatch.setattr(bundled, "data_file", lambda name: changed)
    try:
        again = _fresh()
    finally:
        load._load.cache_clear()  # later tests in this process must not get the changed digits from the lru cache
    assert not _same(again, first) and all(bool((x == 1.0).all()) for x in again.x_train)
    assert len(_entries()) == 2
