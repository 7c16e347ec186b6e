"""Fixtures writing tiny dataset files in the real formats, and an isolated data root.

Unless a test is marked ``real_data``, ``$VFLPRIV_DATA`` points at an empty temporary directory, and the Debian
packages' folders at missing ones, so the loaders only see the files a test writes.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "real_data: uses the real benchmark files (skips when absent)")


@pytest.fixture(autouse=True)
def _isolated_data_root(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if request.node.get_closest_marker("real_data") is None:
        monkeypatch.setenv("VFLPRIV_DATA", str(tmp_path / "empty-data-root"))
        # the Debian packages' folders too: a machine with r-cran-mlbench but no rdata reads 'present, unreadable'
        from vflpriv.data import paths

        monkeypatch.setattr(paths, "SYSTEM_ROOT", tmp_path / "empty-system-root")


def write_idx(path: Path, array: np.ndarray) -> Path:
    """Write ``array`` (uint8) as a gzipped IDX file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = bytes([0, 0, 8, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(path, "wb") as handle:
        handle.write(header + array.astype(np.uint8).tobytes())
    return path


def write_png(path: Path, pixels: np.ndarray) -> Path:
    """Write uint8 ``[H, W]`` or ``[H, W, 3]`` pixels as a PNG."""
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(pixels.astype(np.uint8)).save(path)
    return path


def write_matrix(path: Path, matrix: np.ndarray, sep: str, fmt: str) -> Path:
    """Write rows with a trailing separator, as the NUS-WIDE release does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(sep.join(fmt % v for v in row) + sep + "\n" for row in matrix))
    return path


@pytest.fixture
def writers() -> SimpleNamespace:
    """The file writers above, for the test modules."""
    return SimpleNamespace(idx=write_idx, png=write_png, matrix=write_matrix)
