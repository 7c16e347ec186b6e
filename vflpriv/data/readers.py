"""File-format readers shared by the loaders; each turns a malformed file into one clear DataError.

Formats: gzipped IDX (MNIST family), R ``.rda`` (via the pure-Python ``rdata`` package), the CIFAR python
pickle batches (through an unpickler that only builds numpy arrays), images (Pillow) and large CSV/TSV
files sampled in one streaming pass, so a 6 GB Avazu file can be capped without loading it whole.
"""

from __future__ import annotations

import gzip
import pickle
import struct
import warnings
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vflpriv.common.errors import DataError
from vflpriv.data.paths import corrupt

if TYPE_CHECKING:  # imported where a table is read: every run's planning imports this module (the dataset catalog)
    import pandas as pd

_PICKLE_ALLOWED = {  # what numpy arrays (and, under protocol 2, bytes) need to be rebuilt
    ("_codecs", "encode"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"),
}


def read_idx(path: Path, *, dataset: str, layout: str) -> np.ndarray:
    """Read a gzipped IDX file of unsigned bytes (magic ``00 00 08 <ndim>``) into a uint8 array."""
    try:
        with gzip.open(path, "rb") as handle:
            raw = handle.read()
    except (OSError, EOFError, zlib.error) as exc:
        raise corrupt(dataset, path, f"not a readable gzip file ({exc})", layout) from None
    if len(raw) < 4 or raw[:3] != b"\x00\x00\x08":
        raise corrupt(dataset, path, "not an IDX file of unsigned bytes (bad magic number)", layout)
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise corrupt(dataset, path, "truncated IDX header", layout)
    dims = struct.unpack(f">{ndim}I", raw[4:header])
    expected = int(np.prod(dims))
    if len(raw) - header != expected:
        raise corrupt(
            dataset, path, f"shape {dims} needs {expected} bytes, found {len(raw) - header}", layout
        )
    return np.frombuffer(raw, np.uint8, offset=header).reshape(dims).copy()


def read_rda(path: Path, name: str, *, dataset: str, layout: str) -> pd.DataFrame:
    """Read the data frame ``name`` from an R ``.rda`` file."""
    import pandas as pd

    try:
        import rdata
    except ImportError:
        raise DataError(
            f"{dataset}: reading {path} needs the 'rdata' package: pip install 'vflpriv[data]'"
        ) from None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rdata warns that old .rda files declare no string encoding
        try:
            objects = rdata.read_rda(path)
        except Exception as exc:  # rdata raises many types for malformed input; all mean "corrupt"
            raise corrupt(dataset, path, f"not a readable .rda file ({exc})", layout) from None
    frame = objects.get(name)
    if not isinstance(frame, pd.DataFrame):
        raise corrupt(dataset, path, f"no data frame named {name!r}", layout)
    return frame


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickler that builds only numpy arrays and plain containers, never arbitrary objects."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _PICKLE_ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def read_array_pickle(path: Path, *, dataset: str, layout: str) -> dict[Any, Any]:
    """Load a pickled dict of numpy arrays and lists (the CIFAR python batch format)."""
    try:
        with open(path, "rb") as handle:
            obj = _ArrayUnpickler(handle, encoding="bytes").load()
    except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError) as exc:
        raise corrupt(dataset, path, f"not a readable pickle batch ({exc})", layout) from None
    if not isinstance(obj, dict):
        raise corrupt(dataset, path, "the pickle does not hold a dict", layout)
    return obj


def read_image(path: Path, *, mode: str, size: int, dataset: str, layout: str) -> np.ndarray:
    """Read an image as uint8 ``[H, W]`` (mode ``L``) or ``[H, W, 3]`` (``RGB``), resized to ``size``."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            image = image.convert(mode)
            if image.size != (size, size):
                image = image.resize((size, size), Image.BILINEAR)
            return np.asarray(image, dtype=np.uint8)
    except (OSError, UnidentifiedImageError, ValueError) as exc:
        raise corrupt(dataset, path, f"not a readable image ({exc})", layout) from None


def read_table(
    path: Path,
    *,
    dataset: str,
    layout: str,
    max_rows: int | None = None,
    seed: int = 0,
    chunk_rows: int = 500_000,
    **read_kwargs: Any,
) -> pd.DataFrame:
    """Read a CSV/TSV; with ``max_rows``, a uniform sample of that many rows chosen with ``seed``.

    Sampling streams the file in chunks and keeps the rows with the smallest random keys, so memory
    stays proportional to ``max_rows`` and the sample does not depend on the chunk size. Rows keep
    their file order.
    """
    import pandas as pd

    try:
        if max_rows is None:
            return pd.read_csv(path, **read_kwargs)
        rng = np.random.default_rng(seed)
        kept: pd.DataFrame | None = None
        keys = np.empty(0)
        for chunk in pd.read_csv(path, chunksize=chunk_rows, **read_kwargs):
            kept = chunk if kept is None else pd.concat([kept, chunk])
            keys = np.concatenate([keys, rng.random(len(chunk))])
            if len(kept) > max_rows:
                best = np.sort(np.argpartition(keys, max_rows)[:max_rows])
                kept, keys = kept.iloc[best], keys[best]
    except (OSError, UnicodeDecodeError, ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise corrupt(dataset, path, f"not a readable table ({exc})", layout) from None
    if kept is None:
        raise corrupt(dataset, path, "the file holds no rows", layout)
    return kept.reset_index(drop=True)
