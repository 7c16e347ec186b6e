"""The verified cache: a finetune-phase strength sweep pretrains once per seed (and the priors' numbers,
the CAE autoencoders and bundled datasets' tensors are stored in the same verified entry files: see
``cached_labels`` and ``vflpriv.data.load``).

Each caller keys its entries by a hash of everything the value depends on, vflpriv's source code included
(``code_version``); a pretraining's key is ``vflpriv.runner.execution.pretrain_key``. An entry is one file: a JSON manifest line (format, its name, SHA-256 of the manifest and payload, the state-dict structure of
every module: names, shapes, dtypes) followed by the payload (module state dicts and the pretraining
traffic the meter counted, so a cached run reports the same communication as a fresh one), read back
with ``torch.load(weights_only=True)``.

Every entry is verified before use: the checksum, the key it was written under (its file name), the structure
against the method's ``skeleton``, the traffic rows. One that does not check out (truncated, not an entry, bytes overwritten, modules missing
or of another shape) is reported with a warning, deleted and recomputed: never used, never fatal.
Files are written to a temporary name and renamed, so a reader never sees half a file, and a per-key
file lock makes a parallel run wait for a pretraining in progress rather than repeat it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from filelock import FileLock

from vflpriv.common.declarations import SUBPACKAGES
from vflpriv.common.errors import CacheError
from vflpriv.store.folders import usable_folder

if TYPE_CHECKING:  # torch is imported where an entry is written or read: the command line imports this module
    from torch import nn

ENV_VAR = "VFLPRIV_CACHE"
FORMAT = 2
SUFFIX = ".entry"

#: vflpriv's packages: this one and those installed from top-level folders (setuptools package-dir), the one list
#: ``vflpriv_own`` reads too (``vflpriv.auditors`` was missing here: an edited auditor kept stale cached trials).
PACKAGES = ("vflpriv", *SUBPACKAGES)

T = TypeVar("T")

#: The phase whose traffic a cached pretraining restores beside its modules.
PRETRAIN = "pretrain"


class Traffic(Protocol):
    """What a cached computation restores beside its modules: the messages it sent (``engine.Meter``), as rows
    (phase, direction, kind, bytes, messages)."""

    def rows(self, phase: str) -> list[list]: ...

    def add_rows(self, rows: list[list]) -> None: ...


def cache_root() -> Path:
    """``$VFLPRIV_CACHE`` if set, else ``~/.cache/vflpriv``."""
    return Path(os.environ.get(ENV_VAR) or Path.home() / ".cache" / "vflpriv")


def cache_dir() -> Path:
    """Where pretrainings (and the priors' numbers) live: the cache root's ``pretrain/``."""
    return cache_root() / "pretrain"


@lru_cache(maxsize=1)
def code_version() -> str:
    """Hash of vflpriv's own source (every package folder): editing the code invalidates every cached pretraining."""
    digest = hashlib.sha256()
    for package in PACKAGES:
        for folder in importlib.util.find_spec(package).submodule_search_locations:
            for path in sorted(Path(folder).rglob("*.py")):
                digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def check_writable() -> Path:
    """The cache folder, checked without creating it; a ConfigError (before any training) when it could not be
    written."""
    return usable_folder(cache_dir(), what=f"the pretraining cache (${ENV_VAR})")


def entry_path(key: str) -> Path:
    return cache_dir() / f"{key}{SUFFIX}"


def claim(key: str, directory: Path | None = None) -> FileLock:
    """An inter-process lock on ``key``: held while one run pretrains it, so parallel runs of a sweep
    (other strengths or label budgets of the same seed) wait and load it instead of pretraining it again. Its file
    (and folder) are made when it is first taken."""
    return FileLock((directory or cache_dir()) / f"{key}.lock")


#: Entries computed while a command still checks its settings (:func:`held_back`), written only once it runs.
_HELD: ContextVar[list | None] = ContextVar("vflpriv_cache_held", default=None)


@contextmanager
def held_back(*, keep: bool = True) -> Iterator[None]:
    """Inside, :func:`cached` reads what is there but writes nothing (no entry, no lock file, no folder): a command
    refused while checking leaves the cache as it was. The entries computed inside are written when it ends without
    an error, unless ``keep`` is off (a dry run: the cache is left as it was whatever happens)."""
    held: list = []
    token = _HELD.set(held)
    try:
        yield
    finally:
        _HELD.reset(token)
    for path, value, write, lock in held if keep else []:
        try:
            cached(path, lambda v=value: v, read=lambda _p, v=value: v, write=write, lock=lock)
        except OSError:  # an unwritable cache only means the next command computes it again
            pass


def write_entry(path: Path, payload: bytes, **manifest) -> None:
    """An entry file: a JSON manifest line (``manifest`` + format + the entry's own file name, which holds its key +
    the SHA-256 of all of them and the payload: :func:`_checksum`), then the payload; written to a temporary name and renamed, so a reader never sees half a
    file."""
    head = {"format": FORMAT, "entry": path.name, **manifest}
    head["sha256"] = _checksum(head, payload)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(json.dumps(head).encode() + b"\n" + payload)
    tmp.replace(path)


def _checksum(manifest: dict, payload: bytes) -> str:
    """SHA-256 of the manifest (all but the checksum: its entry name, so an entry copied under another key with its
    name edited does not check out) and the payload."""
    head = json.dumps({k: v for k, v in manifest.items() if k != "sha256"}, sort_keys=True).encode()
    return hashlib.sha256(head + b"\n" + payload).hexdigest()


def read_entry(path: Path) -> tuple[dict, bytes]:
    """(manifest, payload) of an entry file; :class:`CacheError` unless its manifest and checksum check out and it
    was written under this name (another key's entry copied here is not this key's value)."""
    head, sep, payload = path.read_bytes().partition(b"\n")
    try:
        manifest = json.loads(head) if sep else None
    except (json.JSONDecodeError, UnicodeDecodeError):
        manifest = None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise CacheError("not a vflpriv cache entry (no manifest line)")
    if _checksum(manifest, payload) != manifest.get("sha256"):
        raise CacheError("checksum mismatch (truncated or overwritten, or its manifest edited)")
    if manifest.get("entry") != path.name:  # its key is its name: a whole entry copied or moved under another key
        raise CacheError(f"it was written as {manifest.get('entry')!r}, not as {path.name} (another key's entry)")
    return manifest, payload


def discard(path: Path, exc: CacheError, notes: list[str] | None) -> None:
    """Report a corrupt entry (a warning, and a line in ``notes``) and delete it."""
    message = f"cache entry {path.name} discarded and recomputed: {exc}"
    warnings.warn(message, stacklevel=3)
    if notes is not None:
        notes.append(message)
    path.unlink(missing_ok=True)


def _structure(modules: list[nn.Module]) -> list[list[list]]:
    return [[[name, list(t.shape), str(t.dtype)] for name, t in m.state_dict().items()] for m in modules]


def save(key: str, modules: list[nn.Module], meter: Traffic | None) -> None:
    """Store the modules and the meter's pretraining traffic under ``key`` (atomic rename)."""
    import torch

    traffic = [] if meter is None else meter.rows(PRETRAIN)
    buffer = io.BytesIO()
    torch.save({"modules": [m.state_dict() for m in modules], "traffic": traffic}, buffer)
    write_entry(entry_path(key), buffer.getvalue(), structure=_structure(modules), traffic_rows=len(traffic))


def load(key: str, skeleton: list[nn.Module], meter: Traffic | None) -> bool:
    """Fill ``skeleton`` and ``meter`` from the entry; False on a miss; :class:`CacheError` (nothing
    changed) when the entry does not check out."""
    import torch

    path = entry_path(key)
    if not path.exists():
        return False
    manifest, payload = read_entry(path)
    if manifest.get("structure") != _structure(skeleton):
        raise CacheError("its modules do not match the method's architecture")
    try:
        saved = torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)
        states, traffic = saved["modules"], saved["traffic"]
    except Exception as exc:  # noqa: BLE001 - any unreadable payload is a corrupt entry
        raise CacheError(f"unreadable payload ({type(exc).__name__})") from None
    if _structure_of_states(states) != manifest["structure"] or len(traffic) != manifest["traffic_rows"]:
        raise CacheError("its payload does not match its manifest")
    if not all(isinstance(r, list) and len(r) == 5 and all(isinstance(v, int) for v in r[3:]) for r in traffic):
        raise CacheError("malformed traffic rows")
    for module, state in zip(skeleton, states):
        module.load_state_dict(state)
    if meter is not None:
        meter.add_rows(traffic)
    return True


def cached(
    path: Path, compute: Callable[[], T], *, read: Callable[[Path], T], write: Callable[[Path, T], None],
    lock: FileLock, notes: list[str] | None = None,
) -> T:
    """``read(path)`` when an entry is there and checks out, else ``compute()``, ``write`` and return it; all
    under ``lock``, so parallel processes compute it once. An entry that does not check out
    (:class:`CacheError`) is reported (a warning, and a line in ``notes``), discarded and recomputed."""
    held = _HELD.get()
    if held is not None:  # checking: a verified entry is read (entries appear by atomic renames), nothing written
        if path.exists():
            try:
                return read(path)
            except CacheError:
                pass
        value = compute()
        held.append((path, value, write, lock))
        return value
    path.parent.mkdir(parents=True, exist_ok=True)
    with lock:
        if path.exists():
            try:
                return read(path)
            except CacheError as exc:
                discard(path, exc, notes)
        value = compute()
        write(path, value)
        return value


def cached_labels(
    key: str, compute: Callable[[], dict[str, list[int]]], *, notes: list[str] | None = None
) -> dict[str, list[int]]:
    """Predicted labels per target set stored under ``key`` (an entry holding their JSON), else computed and
    stored: parallel runs of a sweep compute a prior once, not once per process, and every attack is compared with
    it on the targets it guessed."""
    return cached(cache_dir() / f"{key}.labels", compute, read=_read_labels, lock=claim(key), notes=notes,
                  write=lambda path, values: write_entry(path, json.dumps(values, sort_keys=True).encode()))


def _read_labels(path: Path) -> dict[str, list[int]]:
    _, payload = read_entry(path)
    try:
        values = json.loads(payload)
    except ValueError:
        raise CacheError("unreadable labels") from None
    if not isinstance(values, dict) or not all(
            isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v)
            for v in values.values()):
        raise CacheError("its labels are not lists of class indices")
    return values


def _structure_of_states(states: object) -> list:
    if not isinstance(states, list) or not all(isinstance(s, dict) for s in states):
        return []
    return [[[name, list(t.shape), str(t.dtype)] for name, t in s.items()] for s in states]


def cached_modules(
    key: str,
    skeleton: Callable[[], list[nn.Module]],
    compute: Callable[[], list[nn.Module]],
    *,
    meter: Traffic | None = None,
    notes: list[str] | None = None,
) -> list[nn.Module]:
    """The modules stored under ``key`` (loaded into ``skeleton()``), else computed and stored; a parallel
    run needing the same entry waits for this one, then loads it."""
    modules = skeleton()

    def read(_path: Path) -> list[nn.Module]:
        load(key, modules, meter)
        return modules

    return cached(entry_path(key), compute, read=read, write=lambda _path, computed: save(key, computed, meter),
                  lock=claim(key), notes=notes)
