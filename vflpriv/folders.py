"""Folders vflpriv writes to (results, the pretraining cache), checked before any work starts."""

from __future__ import annotations

import tempfile
from pathlib import Path

from vflpriv.errors import ConfigError


def writable_folder(path: Path, *, what: str) -> Path:
    """``path`` as a folder this process can write (created if missing), or one ConfigError naming ``what``."""
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{what} {path} is a file; give a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise ConfigError(f"{what} {path} is not a writable folder ({exc.strerror})") from None
    return path
