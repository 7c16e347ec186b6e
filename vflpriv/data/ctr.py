"""Click-through-rate datasets in the papers' two-party settings: Avazu (FedHSSL) and Criteo (VFLHLP).

Categorical fields become embedding indices: label-encoded with the train vocabulary, index 0 reserved
for values unseen in train; they lead each party's tensor and are described by
``PartySpec.cardinalities``. Numeric fields follow, min-max scaled with train statistics.
``max_samples`` caps the training rows (sampled with ``seed`` in one streaming pass over the file);
the test set is then capped in the papers' proportion (Avazu 100k/20k, Criteo 80k/10k). Without
``max_samples`` the whole file is loaded: Kaggle's files hold 40M+ rows, so set it (the papers use 100k).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from vflpriv.data.base import VerticalDataset
from vflpriv.data.paths import corrupt, locate
from vflpriv.data.prep import MIN_MAX, VOCABULARY, build, check_parties, encode_categories, minmax
from vflpriv.data.readers import read_table

if TYPE_CHECKING:  # imported where the files are read: every run\'s planning imports this module (the catalog)
    import pandas as pd

#: (sparse, dense) fields per party; party 0 is the active party (REFERENCE §13, FedHSSL's split).
AVAZU_FIELDS = (
    (("device_ip", "device_model", "C14", "C17", "C19", "C20", "C21"), ("C15", "C16", "C18")),
    (
        ("site_id", "site_domain", "site_category", "app_id", "app_domain", "app_category", "device_id"),
        ("C1", "banner_pos", "device_type", "device_conn_type"),
    ),
)
AVAZU_TRAIN = ("train.csv", "train.csv.gz", "train", "train.gz")
AVAZU_TEST = ("test.csv", "test.csv.gz")
AVAZU_LAYOUT = (
    "train.csv (or train.csv.gz, or Kaggle's train / train.gz): comma-separated with a header holding "
    "click and the fields C1, banner_pos, site_*, app_*, device_*, C14-C21; optionally test.csv with "
    "the same columns (otherwise train is split 5:1 with the seed)"
)
CRITEO_DENSE = tuple(f"I{i}" for i in range(1, 14))
CRITEO_SPARSE = tuple(f"C{i}" for i in range(1, 27))
CRITEO_TRAIN = ("train.txt", "train.txt.gz", "dac_sample.txt")
CRITEO_LAYOUT = (
    "train.txt (or train.txt.gz, dac_sample.txt): tab-separated, no header, 40 columns: "
    "label (0/1), I1-I13 (integers, may be empty), C1-C26 (hashed strings, may be empty); "
    "split 8:1 into train/test with the seed"
)
_AVAZU_TEST_RATIO = 5
_CRITEO_TEST_RATIO = 8


def _labels(frame: pd.DataFrame, column: str, path: Path, dataset: str, layout: str) -> np.ndarray:
    """The 0/1 label column as int64, or a DataError naming the file."""
    import pandas as pd

    values = pd.to_numeric(frame[column], errors="coerce")
    if values.isna().any() or not values.isin([0, 1]).all():
        raise corrupt(dataset, path, f"column {column} must hold only 0 and 1", layout)
    return values.to_numpy(np.int64)


def _split_rows(y: np.ndarray, n_test: int | None, ratio: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Split rows ratio:1 into train/test with ``seed``, stratified by label when possible."""
    test_size = n_test if n_test is not None else 1 / (ratio + 1)
    idx = np.arange(len(y))
    stratify = y if np.bincount(y, minlength=2).min() >= 2 else None
    from sklearn.model_selection import train_test_split  # only when a CTR file is read

    tr, te = train_test_split(idx, test_size=test_size, stratify=stratify, random_state=seed)
    return np.sort(tr), np.sort(te)


def _party_block(
    train: pd.DataFrame, test: pd.DataFrame, sparse: tuple[str, ...], dense: tuple[str, ...]
) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """One party's [category codes | min-max scaled numerics] for train and test."""
    codes_tr, codes_te, cards = encode_categories(train[list(sparse)], test[list(sparse)])
    num_tr, num_te = minmax(train[list(dense)].to_numpy(np.float32), test[list(dense)].to_numpy(np.float32))
    return np.hstack([codes_tr, num_tr]), np.hstack([codes_te, num_te]), cards


def _fitted(sparse: tuple[str, ...], dense: tuple[str, ...]) -> str:
    """What :func:`_party_block` fits on the training rows for a party of these fields."""
    return "; ".join(what for what, fields in ((VOCABULARY, sparse), (MIN_MAX, dense)) if fields)


def _test_cap(max_samples: int | None, ratio: int) -> int | None:
    return None if max_samples is None else max(1, max_samples // ratio)


def load_avazu(
    *, parties: int = 2, root: Path | None = None, max_samples: int | None = None, seed: int = 0
) -> VerticalDataset:
    """Avazu CTR, FedHSSL's two-party field split, label ``click`` (binary, AUC)."""
    name = "avazu"
    check_parties(name, parties, (2,))
    directory, train_path = locate(name, root, AVAZU_TRAIN, AVAZU_LAYOUT)
    sparse = [f for fields, _ in AVAZU_FIELDS for f in fields]
    dense = [f for _, fields in AVAZU_FIELDS for f in fields]
    options = {"usecols": ["click", *sparse, *dense], "dtype": {f: str for f in sparse}}
    n_test = _test_cap(max_samples, _AVAZU_TEST_RATIO)
    test_path = next((directory / f for f in AVAZU_TEST if (directory / f).exists()), None)

    def read(path: Path, rows: int | None) -> pd.DataFrame:
        frame = read_table(path, dataset=name, layout=AVAZU_LAYOUT, max_rows=rows, seed=seed, **options)
        frame["click"] = _labels(frame, "click", path, name, AVAZU_LAYOUT)
        try:
            frame[dense] = frame[dense].astype(np.float32)
        except ValueError as exc:
            raise corrupt(name, path, f"non-numeric dense field ({exc})", AVAZU_LAYOUT) from None
        return frame

    if test_path is not None:
        train, test = read(train_path, max_samples), read(test_path, n_test)
    else:
        total = None if max_samples is None else max_samples + n_test
        frame = read(train_path, total)
        if len(frame) < 2:
            raise corrupt(name, train_path, "fewer than 2 rows, cannot split train/test", AVAZU_LAYOUT)
        exact = n_test if total is not None and len(frame) == total else None
        tr, te = _split_rows(frame["click"].to_numpy(), exact, _AVAZU_TEST_RATIO, seed)
        train, test = frame.iloc[tr], frame.iloc[te]
    blocks = [_party_block(train, test, s, d) for s, d in AVAZU_FIELDS]
    return build(
        name,
        [b[0] for b in blocks],
        [b[1] for b in blocks],
        train["click"].to_numpy(),
        test["click"].to_numpy(),
        num_classes=2,
        modality="tabular",
        fitted=[_fitted(s, d) for s, d in AVAZU_FIELDS],
        cardinalities=[b[2] for b in blocks],
    )


def load_criteo(
    *, parties: int = 2, root: Path | None = None, max_samples: int | None = None, seed: int = 0
) -> VerticalDataset:
    """Criteo CTR in VFLHLP's setting: active party = 26 categorical fields, passive = 13 numeric.

    Numeric fields: missing -> 0, negatives clipped to 0, ``log(1 + x)``, then min-max scaled on train.
    """
    name = "criteo"
    check_parties(name, parties, (2,))
    _, path = locate(name, root, CRITEO_TRAIN, CRITEO_LAYOUT)
    n_test = _test_cap(max_samples, _CRITEO_TEST_RATIO)
    total = None if max_samples is None else max_samples + n_test
    frame = read_table(
        path,
        dataset=name,
        layout=CRITEO_LAYOUT,
        max_rows=total,
        seed=seed,
        sep="\t",
        header=None,
        names=["label", *CRITEO_DENSE, *CRITEO_SPARSE],
        index_col=False,
        dtype={f: str for f in CRITEO_SPARSE},
    )
    y = _labels(frame, "label", path, name, CRITEO_LAYOUT)
    try:
        numeric = frame[list(CRITEO_DENSE)].astype(np.float64).fillna(0.0).clip(lower=0.0)
    except ValueError as exc:
        raise corrupt(name, path, f"non-integer numeric field ({exc})", CRITEO_LAYOUT) from None
    if len(frame) < 2:
        raise corrupt(name, path, "fewer than 2 rows, cannot split train/test", CRITEO_LAYOUT)
    exact = n_test if total is not None and len(frame) == total else None
    tr, te = _split_rows(y, exact, _CRITEO_TEST_RATIO, seed)
    logs = np.log1p(numeric.to_numpy()).astype(np.float32)
    num_tr, num_te = minmax(logs[tr], logs[te])
    cat = frame[list(CRITEO_SPARSE)]
    codes_tr, codes_te, cards = encode_categories(cat.iloc[tr], cat.iloc[te])
    return build(
        name,
        [codes_tr, num_tr],
        [codes_te, num_te],
        y[tr],
        y[te],
        num_classes=2,
        modality="tabular",
        fitted=[VOCABULARY, MIN_MAX],
        cardinalities=[cards, ()],
    )


#: VFLHLP's split (paper 001 §5.1): each party's local rows are its own (2 x 40000 of 80000 on Criteo), so the
#: non-aligned rows are divided between the parties, not shared (finding X1).
load_criteo.default_partition = {"unaligned": "disjoint"}
