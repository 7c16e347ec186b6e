"""Reading a results store without writing it: what a read command shows, and the checks a write command makes in
planning, before it opens the store to write (the file is opened with SQLite's ``mode=ro``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from vflpriv.common.errors import ConfigError
from vflpriv.store.folders import creatable
from vflpriv.store.records import RunRecord, stored
from vflpriv.store.schema import APPLICATION_ID, foreign, identity, in_chunks, read_only, record_field
from vflpriv.store.verification import other_canary_key, other_data


@dataclass(frozen=True)
class StoreContents:
    """What a read command found in a store: the records that check out, and (key, what is wrong) for each
    damaged one, set aside."""

    records: list[RunRecord]
    damaged: list[tuple[str, str]]
    #: When each record was written (the ``updated`` column, seconds since the epoch), by key.
    written: dict[str, float] = field(default_factory=dict)


def read_store(path: Path | str) -> StoreContents:
    """Every record of the vflpriv store at ``path``, read without writing: the file is opened read-only
    (SQLite's ``mode=ro``), so a read command never creates, initialises or changes the store it is given.
    ConfigError when ``path`` is not a vflpriv store (empty, not SQLite, another program's database)."""
    path = Path(path)
    if path.stat().st_size == 0:
        raise ConfigError(f"results store {path} is an empty file (0 bytes), not a vflpriv results store")
    with read_only(path) as db:
        app_id, tables = identity(db)
        if app_id != APPLICATION_ID:
            raise ConfigError(foreign(path, app_id, tables))
        if "runs" not in tables:
            raise ConfigError(f"results store {path} has lost its runs table (tables: {', '.join(tables) or 'none'})")
        rows = db.execute("SELECT key, record, updated FROM runs ORDER BY key").fetchall()
    records, damaged = [], []
    for key, text, _ in rows:
        record, problem = stored(key, text)  # each record parsed once
        if problem:
            damaged.append((str(key), problem))
        else:
            records.append(record)
    return StoreContents(records=records, damaged=damaged, written={str(k): float(u) for k, _, u in rows})


def stored_other_canary_key(path: Path | str, keys: list[str], current: str) -> list[tuple[str, str]]:
    """(key, what) for each record of ``keys`` in the store at ``path`` whose canaries another canary key than the one
    of fingerprint ``current`` drew (``verification.other_canary_key``), read without writing (none where no runs)."""
    return other_canary_key(_read_column(path, keys, record_field("canary_key")), current)


def stored_other_data(path: Path | str, expected: dict[str, str]) -> list[tuple[str, str]]:
    """(key, what it was computed on) for each record of ``expected``'s keys in the store at ``path`` of other data than
    ``expected`` gives (``verification.other_data``), read without writing (none where it does not exist or holds no
    runs yet): what a command checks in planning, before it opens the store to write."""
    return other_data(_read_column(path, list(expected), record_field("data_fingerprint")), expected)


def _read_column(path: Path | str, keys: list[str], column: str) -> list[tuple[str, object]]:
    """(key, ``column``) of each of ``keys`` the store at ``path`` holds, read without writing (none where it does not
    exist or holds no runs yet)."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size == 0:
        return []
    with read_only(path) as db:
        if "runs" not in identity(db)[1]:
            return []
        return [row for chunk, marks in in_chunks(keys)
                for row in db.execute(f"SELECT key, {column} FROM runs WHERE key IN ({marks})", chunk)]


def check_store_path(path: Path | str) -> None:
    """Refuse, before anything is created, a store path a write command could not use: a folder, a path that
    cannot be created, an existing file that is not a vflpriv store (read without writing it)."""
    path = Path(path)
    creatable(path, what="results store")
    if path.is_dir():
        raise ConfigError(f"results store {path} is a directory; give the path of a .sqlite file")
    if path.is_file() and path.stat().st_size > 0:
        with read_only(path) as db:
            app_id, tables = identity(db)
        if app_id != APPLICATION_ID and (app_id or tables):
            raise ConfigError(foreign(path, app_id, tables) + "; give a new path")
