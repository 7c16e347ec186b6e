"""The results store's file: its SQLite schema, the ``application_id`` that marks it as vflpriv's, and the
connections (read-write and read-only) every store module opens it with."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from vflpriv.common.errors import ConfigError

APPLICATION_ID = 0x76666C70  # "vflp"
#: One statement each: they run inside the opening transaction (``executescript`` would commit it first).
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS runs (key TEXT PRIMARY KEY, training_key TEXT NOT NULL, status TEXT NOT NULL, "
    "record TEXT NOT NULL, updated REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS runs_by_training ON runs (training_key)",
    "CREATE TABLE IF NOT EXISTS claims (training_key TEXT PRIMARY KEY, owner TEXT NOT NULL, host TEXT NOT NULL, "
    "pid INTEGER NOT NULL, expires REAL NOT NULL)",
)

#: Seconds a write waits for another process's lock (sweeps sharing a store take turns, each write brief).
LOCK_WAIT = 60.0
#: Seconds the check before a command waits: a lock held this long is another program's, not a turn being taken.
BUSY_WAIT = 5.0


def connect(path: Path) -> sqlite3.Connection:
    """A read-write connection; explicit transactions (``Store._transaction``), one connection may serve several
    threads, each use under ``Store._lock``."""
    return sqlite3.connect(path, timeout=LOCK_WAIT, isolation_level=None, check_same_thread=False)


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection that cannot write (SQLite's ``mode=ro``); a file SQLite cannot read is one ConfigError."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_WAIT)
        try:
            yield db
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        raise ConfigError(unusable(path, exc, waited=BUSY_WAIT, verb="cannot be read")) from None


def unusable(path: Path, exc: sqlite3.DatabaseError, *, waited: float, verb: str) -> str:
    """Why a store could not be used: a lock another process holds reads as one, not as a damaged file."""
    if getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return (f"results store {path} is locked by another process (waited {waited:g} s): another vflpriv command "
                "writing to it, or a program holding it open in a transaction; let it finish or give another --store")
    return f"results store {path} {verb} as a SQLite database ({exc})"


def identity(db: sqlite3.Connection) -> tuple[int, list[str]]:
    """The file's application id and its tables' names (sorted)."""
    app_id = db.execute("PRAGMA application_id").fetchone()[0]
    return app_id, sorted(r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))


def foreign(path: Path, app_id: int, tables: list[str]) -> str:
    """Why the SQLite file at ``path`` is not a vflpriv store: empty, or another program's database."""
    if app_id == 0 and not tables:
        return f"results store {path} is an empty SQLite database, not a vflpriv results store"
    what = f"application id {app_id:#x}" if app_id else f"tables: {', '.join(tables)}"
    return f"results store {path} is another program's SQLite database ({what}), not a vflpriv results store"


def in_chunks(keys: list[str]) -> Iterator[tuple[list[str], str]]:
    """``keys`` 500 at a time, each chunk with its placeholders (SQLite bounds the parameters of one statement)."""
    for start in range(0, len(keys), 500):
        chunk = keys[start:start + 500]
        yield chunk, ",".join("?" * len(chunk))


def record_field(name: str) -> str:
    """The stored records' field ``name``, read by SQLite (records are strict JSON) without parsing each record in
    Python; NULL for a damaged record (``gap.record_problems`` judges it) and for one written before the field."""
    return f"CASE WHEN json_valid(record) AND json_type(record) = 'object' THEN json_extract(record, '$.{name}') END"
