"""Folders and files vflpriv writes to (results, stores, the pretraining cache), checked before any work starts."""

from __future__ import annotations

import os
import re
import stat
import tempfile
import time
from pathlib import Path

from vflpriv.common.errors import ConfigError


#: The results store's file name in an --out folder: where a command keeps its runs without --store, and what a
#: reader given the folder (``vflpriv table``, ``report``, ``load_results``) opens.
STORE_NAME = "results.sqlite"
#: Each command's --out when none is given (the Python API's ``evaluate`` and ``sweep`` write where theirs do;
#: reproduce's is formatted with the analogue's name and ``-quick`` under --quick).
DEFAULT_OUT = {"evaluate": "vflpriv-out", "sweep": "vflpriv-sweep", "audit": "vflpriv-audit", "tune": "vflpriv-tune",
               "table": "vflpriv-tables", "report": "vflpriv-report", "reproduce": "vflpriv-reproduce-{name}{quick}"}


def default_store(out: Path) -> Path:
    """The store a command writing into ``out`` keeps its runs in without --store."""
    return out / STORE_NAME


#: The longest path the system takes (Linux PATH_MAX, with its terminating NUL); longer ones fail every call.
PATH_MAX = 4096
#: Paths longer than this are shown shortened in messages (the whole would be the line).
SHOWN = 120


def shown(path: Path | str) -> str:
    """``path`` for a message: as given, or its start and end around an ellipsis when it is very long."""
    text = str(path)
    return text if len(text) <= SHOWN else f"{text[:60]}...{text[-40:]} ({len(text)} characters)"


def kind_of(path: Path, *, what: str) -> str:
    """What is at ``path``: ``"folder"``, ``"file"``, or ``""`` when nothing is; a path the system refuses to look
    at (a name or the whole path too long, a folder it may not enter) is one ConfigError naming ``what``."""
    _short_enough(path, what=what)
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return ""
    except OSError as exc:
        raise ConfigError(f"{what} {shown(path)} is not a usable path ({exc.strerror})") from None
    return "folder" if stat.S_ISDIR(mode) else "file"


def _short_enough(path: Path, *, what: str) -> None:
    size = len(os.fsencode(str(path.absolute())))
    if size >= PATH_MAX:
        raise ConfigError(f"{what} {shown(path)} is {size} bytes long; the system takes paths of at most "
                          f"{PATH_MAX - 1}")


def writable_folder(path: Path, *, what: str) -> Path:
    """``path`` as a folder this process can write (created if missing), or one ConfigError naming ``what``."""
    creatable(path, what=what, folder=True)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise ConfigError(f"{what} {path} is not a writable folder ({exc.strerror})") from None
    return path


def usable_folder(path: Path, *, what: str) -> Path:
    """``path`` as a folder this process could write, checked without creating anything: an existing one must be a
    writable folder, a missing one creatable (:func:`creatable`); else one ConfigError naming ``what``."""
    if kind_of(path, what=what) == "folder":
        if not os.access(path, os.W_OK | os.X_OK):
            raise ConfigError(f"{what} {path} is not a writable folder (permission denied)")
        return path
    creatable(path, what=what, folder=True)
    return path


def creatable(path: Path, *, what: str, folder: bool = False) -> None:
    """Refuse, without creating anything, a path that could not be created: a name longer than its file system
    allows, a component that is a file, or a missing part under a folder this process cannot write; with
    ``folder``, also an existing file where a folder is wanted."""
    _short_enough(path, what=what)
    current = Path(path.absolute().anchor)
    parts = path.absolute().parts[1:]
    for depth, name in enumerate(parts):
        limit = os.pathconf(current, "PC_NAME_MAX") if current.is_dir() else 255
        _fits(name, limit, path=path, what=what)
        following = current / name
        try:
            exists = following.exists()
        except OSError as exc:
            raise ConfigError(f"{what} {path} is not a usable path ({exc.strerror})") from None
        if not exists:
            if not current.is_dir():
                raise ConfigError(f"{what} {path}: {current} is a file, not a folder")
            try:  # what os.access cannot tell (root, /proc, a read-only mount): a file made and removed at once
                with tempfile.TemporaryFile(dir=current):
                    pass
            except OSError as exc:
                raise ConfigError(f"{what} {path} cannot be created: {current} is not writable ({exc.strerror})") from None
            for rest in parts[depth + 1:]:
                _fits(rest, limit, path=path, what=what)
            return
        current = following
    if folder and not current.is_dir():
        raise ConfigError(f"{what} {path} is a file; give a folder")


def _fits(name: str, limit: int, *, path: Path, what: str) -> None:
    size = len(os.fsencode(name))
    if size > limit:
        raise ConfigError(f"{what} {shown(path)}: the name '{name[:24]}...' is {size} bytes; the file system allows "
                          f"{limit}")


#: A temporary file of :func:`write_csv_atomically` older than this (seconds) was left by a hard kill: it is removed.
STALE_TMP_S = 600


def write_csv_atomically(frame, path: Path) -> None:
    """``frame`` as CSV at ``path``, written to a temporary file of its own beside it (``mkstemp``: two writers never
    share one) and renamed: an interrupted write (Ctrl-C) leaves the file that was there, never half of one, which the
    next command would read as another's results; the temporary files a hard kill left are removed. An OSError (the
    file open in another program on Windows) is the caller's to name."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # as a file written in place (mkstemp's are the owner's alone)
        frame.to_csv(tmp, index=False)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    ours = re.compile(rf"\.{re.escape(path.name)}\.([a-z0-9_]{{8}}|\d+)\.tmp")  # mkstemp's, or the pid of before
    for left in path.parent.glob(f".{path.name}.*.tmp"):
        try:
            if ours.fullmatch(left.name) and left.is_file() and not left.is_symlink() \
                    and left.stat().st_mtime < time.time() - STALE_TMP_S:  # a live writer's is younger
                left.unlink()
        except OSError:
            pass  # another cleaner took it, or it is not ours to remove: it is never read


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()  # read once, at import (setting it to read it is not thread-safe)
