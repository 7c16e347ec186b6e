"""scikit-learn's bundled datasets read from the files scikit-learn ships, and the fixed stratified split, without
importing scikit-learn: its import (scipy, its utilities) cost about 1.2 CPU s of a cold ``vflpriv evaluate``'s 10,
while reading digits takes 0.02 s.

The files are read as scikit-learn's ``load_digits`` and ``load_breast_cancer`` read them (the same numpy calls, so
the same float64 arrays), and ``vflpriv.data.prep.stratified_split`` draws the split scikit-learn's
``train_test_split(..., stratify=y, random_state=0)`` draws. ``tests/data/test_bundled.py`` checks both against
scikit-learn itself.
Where the files are not found (scikit-learn installed without them), :func:`read` returns None and the loaders use
scikit-learn's own functions.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import importlib.util
from pathlib import Path

import numpy as np

#: The files of each bundled dataset in scikit-learn's ``datasets/data`` folder.
FILES = {"digits": "digits.csv.gz", "breast-cancer": "breast_cancer.csv"}

#: SHA-256 of the files scikit-learn ships (those of 1.9.1, unchanged for years): data read from one of them is
#: named by it, so records and stores made before keys held the data's digest stay valid (``vflpriv.data.load``).
PINNED = {"digits": "09f66e6debdee2cd2b5ae59e0d6abbb73fc2b0e0185d2e1957e9ebb51e23aa22",
          "breast-cancer": "fed3eb72d0575ef6192293f5093c6e801b1476b577d0386bf4455504522172ed"}


def data_file(name: str) -> Path | None:
    """The file scikit-learn ships for ``name`` (found without importing scikit-learn), or None."""
    spec = importlib.util.find_spec("sklearn")
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(folder) / "datasets" / "data" / FILES[name]
        if path.is_file():
            return path
    return None


def digest(name: str) -> str | None:
    """SHA-256 of ``name``'s file (what a cached copy of it depends on), or None where it is not found."""
    path = data_file(name)
    return hashlib.sha256(path.read_bytes()).hexdigest() if path is not None else None


def read(name: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(features as float64, labels as int) of ``name`` as scikit-learn's loader returns them (digits' features
    flat, 64 per row), or None where its file is not found."""
    path = data_file(name)
    if path is None:
        return None
    if path.suffix == ".gz":  # load_gzip_compressed_csv_data: np.loadtxt of the decompressed text
        with path.open("rb") as raw, gzip.open(raw, mode="rt", encoding="utf-8") as text:
            data = np.loadtxt(text, delimiter=",")
        return data[:, :-1], data[:, -1].astype(int, copy=False)
    with path.open("r", encoding="utf-8") as text:  # load_csv_data: a header row (samples, features), then rows
        rows = csv.reader(text)
        head = next(rows)
        data = np.empty((int(head[0]), int(head[1])))
        target = np.empty((int(head[0]),), dtype=int)
        for i, row in enumerate(rows):
            data[i] = np.asarray(row[:-1], dtype=np.float64)
            target[i] = np.asarray(row[-1], dtype=int)
    return data, target
