"""The results store: one SQLite row per (training, attack) run, keyed by the hash of its configuration.

Every finished training's records are committed at once, so a killed sweep loses nothing and, run
again, skips the keys already done; failed runs are kept with their error and retried by the next
sweep. Sweeps sharing a store never compute one training twice: a sweep *claims* a training before it
runs it (a row in ``claims`` with a lease it keeps renewing); another sweep skips a live claim and
waits for its records, and takes over a claim whose lease expired or whose process died on this host.

The file is marked with SQLite's ``application_id``, so another program's database (or a file that is
not SQLite) is refused rather than written into. Records are strict JSON (``json_extract`` reads them).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from vflpriv.common.errors import ConfigError
from vflpriv.store.folders import creatable
from vflpriv.store.records import NOT_APPLICABLE, OK, RunRecord, stale_claim, stored

#: Statuses of records a rerun keeps: a failed run is retried.
FINAL = (OK, NOT_APPLICABLE)

APPLICATION_ID = 0x76666C70  # "vflp"
LEASE_SECONDS = 60.0
#: One statement each: they run inside the opening transaction (``executescript`` would commit it first).
_SCHEMA = (
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


def _connect(path: Path) -> sqlite3.Connection:
    # explicit transactions below; one connection may serve several threads, each use under Store._lock
    return sqlite3.connect(path, timeout=LOCK_WAIT, isolation_level=None, check_same_thread=False)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Store:
    """SQLite-backed map from run key to :class:`RunRecord`, with per-training claims."""

    def __init__(self, path: Path | str, *, lease_seconds: float = LEASE_SECONDS):
        self.path = Path(path)
        if self.path.is_dir():
            raise ConfigError(f"results store {self.path} is a directory; give the path of a .sqlite file")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create the folder of results store {self.path}: {exc.strerror}") from None
        self.lease_seconds = lease_seconds
        self.host = socket.gethostname()
        self.owner = f"{self.host}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._lock = threading.RLock()  # results may arrive in a sweep's helper thread
        try:
            self._db = _connect(self.path)
            self._open()
        except sqlite3.DatabaseError as exc:
            raise ConfigError(_unusable(self.path, exc, waited=LOCK_WAIT, verb="is not usable")) from None

    def _open(self) -> None:
        """Check the file is a vflpriv store (or new) and create the schema, in one write transaction: two
        sweeps creating one store at once would otherwise see each other half-initialised (an application
        id of 0 beside tables) and refuse it as another program's database."""
        with self._transaction():
            self._init_schema()

    def _init_schema(self) -> None:
        app_id, tables = _identity(self._db)
        if app_id == 0 and not tables:
            self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        elif app_id != APPLICATION_ID:
            raise ConfigError(_foreign(self.path, app_id, tables) + "; give a new path")
        for statement in _SCHEMA:
            self._db.execute(statement)

    # ------------------------------------------------------------------------------------------ records

    def _one(self, sql: str, params: tuple) -> tuple | None:
        with self._lock:
            return self._db.execute(sql, params).fetchone()

    def done(self, key: str) -> bool:
        """Whether ``key`` has a final record: ``ok``, or ``n/a`` (a non-federated reference: nothing to attack, the
        same on every rerun); a ``failed`` one is retried."""
        row = self._one("SELECT status FROM runs WHERE key = ?", (key,))
        return row is not None and row[0] in FINAL

    def put(self, record: RunRecord) -> None:
        self.put_many([record])

    def put_many(self, records: Iterable[RunRecord]) -> None:
        """Commit the records of one training together."""
        now = time.time()
        rows = [(r.key, r.training_key, r.status, r.to_json(), now) for r in records]
        with self._transaction():
            self._db.executemany("INSERT OR REPLACE INTO runs (key, training_key, status, record, updated) "
                                 "VALUES (?, ?, ?, ?, ?)", rows)

    def get(self, key: str) -> RunRecord | None:
        row = self._one("SELECT record FROM runs WHERE key = ?", (key,))
        return checked_record(key, row[0]) if row else None

    def drop_damaged(self, keys: list[str]) -> list[tuple[str, str]]:
        """Verify the stored records of ``keys`` and delete each that does not check out (so the sweep
        recomputes it); returns (key, what was wrong) for each one deleted."""
        damaged = [(key, problem) for key, text in self._stored(keys) if (problem := stored(key, text, lists=True)[1])]
        self.forget([key for key, _ in damaged])
        return damaged

    def stale_claims(self, keys: list[str]) -> list[tuple[str, str]]:
        """(key, why) for each stored record of ``keys`` whose epsilon other claim rules decided (``stale_claim``)."""
        found = []
        for key, text in self._stored(keys):
            with contextlib.suppress(TypeError, ValueError):  # a damaged record: drop_damaged's
                if why := stale_claim(RunRecord.from_json(text)):
                    found.append((key, why))
        return found

    def _stored(self, keys: list[str], column: str = "record") -> Iterator[tuple[str, object]]:
        """(key, ``column``) of each of ``keys`` the store holds, read 500 keys at a time."""
        for chunk, marks in _in_chunks(keys):
            with self._lock:
                rows = self._db.execute(f"SELECT key, {column} FROM runs WHERE key IN ({marks})", chunk).fetchall()
            yield from rows  # outside the lock: a sweep's helper thread may commit meanwhile

    def other_data(self, expected: dict[str, str]) -> list[tuple[str, str]]:
        """(key, what it was computed on) for each stored record of ``expected``'s keys whose data fingerprint
        (``RunRecord.data_fingerprint``) is not the one given for its key: a result of other data than the data
        as it is now (a changed data file)."""
        return _other_data(self._stored(list(expected), _field("data_fingerprint")), expected)

    def other_canary_key(self, keys: list[str], current: str) -> list[tuple[str, str]]:
        """(key, what) for each stored record of ``keys`` whose canaries were drawn with another canary key than the
        one of fingerprint ``current`` (``RunRecord.canary_key``; '' in a record without canaries: none)."""
        return _other_canary_key(self._stored(keys, _field("canary_key")), current)

    def settled(self, keys: list[str], *, since: float) -> set[str]:
        """Keys whose record is final (``ok``, ``n/a``), or was written (by any sweep) at or after ``since``."""
        out: set[str] = set()
        for chunk, marks in _in_chunks(keys):
            with self._lock:
                rows = self._db.execute(f"SELECT key, status, updated FROM runs WHERE key IN ({marks})",
                                        chunk).fetchall()
            out.update(k for k, status, updated in rows if status in FINAL or updated >= since)
        return out

    def forget(self, keys: list[str]) -> int:
        """Delete these runs (so the next sweep recomputes them, e.g. after the code they measure changed)."""
        with self._transaction():
            n = self._db.executemany("DELETE FROM runs WHERE key = ?", [(k,) for k in keys]).rowcount
        return n

    def all(self) -> list[RunRecord]:
        with self._lock:
            rows = self._db.execute("SELECT key, record FROM runs ORDER BY key").fetchall()
        return [checked_record(key, text) for key, text in rows]

    # ------------------------------------------------------------------------------------------- claims

    def claim(self, training_key: str) -> bool:
        """Take ``training_key`` for this sweep unless another live sweep holds it."""
        now = time.time()
        with self._transaction():
            row = self._db.execute("SELECT owner, host, pid, expires FROM claims WHERE training_key = ?",
                                   (training_key,)).fetchone()
            if row is not None and row[0] != self.owner and row[3] > now:
                owner_dead = row[1] == self.host and not _pid_alive(row[2])
                if not owner_dead:
                    return False
            self._db.execute("INSERT OR REPLACE INTO claims VALUES (?, ?, ?, ?, ?)",
                             (training_key, self.owner, self.host, os.getpid(), now + self.lease_seconds))
        return True

    def release(self, training_keys: Iterable[str]) -> None:
        with self._transaction():
            self._db.executemany("DELETE FROM claims WHERE training_key = ? AND owner = ?",
                                 [(k, self.owner) for k in training_keys])

    @contextlib.contextmanager
    def lease(self) -> Iterator[None]:
        """Renew this store's claims every third of a lease (own connection, background thread); on
        exit stop renewing and drop every claim still held."""
        stop = threading.Event()

        def renew() -> None:
            db = _connect(self.path)
            try:
                while not stop.wait(self.lease_seconds / 3):
                    db.execute("UPDATE claims SET expires = ? WHERE owner = ?",
                               (time.time() + self.lease_seconds, self.owner))
            finally:
                db.close()

        thread = threading.Thread(target=renew, name="vflpriv-lease", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            with self._transaction():
                self._db.execute("DELETE FROM claims WHERE owner = ?", (self.owner,))

    # -------------------------------------------------------------------------------------------- plumbing

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
    with _read_only(path) as db:
        app_id, tables = _identity(db)
        if app_id != APPLICATION_ID:
            raise ConfigError(_foreign(path, app_id, tables))
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


def _in_chunks(keys: list[str]) -> Iterator[tuple[list[str], str]]:
    """``keys`` 500 at a time, each chunk with its placeholders (SQLite bounds the parameters of one statement)."""
    for start in range(0, len(keys), 500):
        chunk = keys[start:start + 500]
        yield chunk, ",".join("?" * len(chunk))


def _field(name: str) -> str:
    """The stored records' field ``name``, read by SQLite (records are strict JSON) without parsing each record in
    Python; NULL for a damaged record (:meth:`Store.drop_damaged` judges it) and for one written before the field."""
    return f"CASE WHEN json_valid(record) AND json_type(record) = 'object' THEN json_extract(record, '$.{name}') END"


def _other_canary_key(rows: Iterable[tuple[str, object]], current: str) -> list[tuple[str, str]]:
    """The rows whose canaries were drawn with a key other than ``current`` (a record without canaries has none)."""
    now = current[:16] or "not made yet"
    return [(key, f"its canaries were drawn with canary key {found[:16]}, the key now is {now}")
            for key, found in rows if isinstance(found, str) and found and found != current]


def stored_other_canary_key(path: Path | str, keys: list[str], current: str) -> list[tuple[str, str]]:
    """:meth:`Store.other_canary_key` of the store at ``path``, read without writing (none where it holds no runs)."""
    return _other_canary_key(_read_column(path, keys, _field("canary_key")), current)


def _read_column(path: Path | str, keys: list[str], column: str) -> list[tuple[str, object]]:
    """(key, ``column``) of each of ``keys`` the store at ``path`` holds, read without writing (none where it does not
    exist or holds no runs yet)."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size == 0:
        return []
    with _read_only(path) as db:
        if "runs" not in _identity(db)[1]:
            return []
        return [row for chunk, marks in _in_chunks(keys)
                for row in db.execute(f"SELECT key, {column} FROM runs WHERE key IN ({marks})", chunk)]


def _other_data(rows: Iterable[tuple[str, object]], expected: dict[str, str]) -> list[tuple[str, str]]:
    """The rows whose fingerprint is known and differs. A record written before the field is kept as it is: which
    data it read is unknown, and an upgrade must not recompute (nor refuse) every store of a non-bundled dataset."""
    other = []
    for key, found in rows:
        if found is None:
            continue
        found = found if isinstance(found, str) else ""
        if found != expected[key]:
            other.append((key, f"computed on data {found[:16] or 'as bundled'}, this data is "
                               f"{expected[key][:16] or 'as bundled'}"))
    return other


def stored_other_data(path: Path | str, expected: dict[str, str]) -> list[tuple[str, str]]:
    """:meth:`Store.other_data` of the store at ``path``, read without writing (none where it does not exist or holds
    no runs yet): what a command checks in planning, before it opens the store to write."""
    return _other_data(_read_column(path, list(expected), _field("data_fingerprint")), expected)


def check_store_path(path: Path | str) -> None:
    """Refuse, before anything is created, a store path a write command could not use: a folder, a path that
    cannot be created, an existing file that is not a vflpriv store (read without writing it)."""
    path = Path(path)
    creatable(path, what="results store")
    if path.is_dir():
        raise ConfigError(f"results store {path} is a directory; give the path of a .sqlite file")
    if path.is_file() and path.stat().st_size > 0:
        with _read_only(path) as db:
            app_id, tables = _identity(db)
        if app_id != APPLICATION_ID and (app_id or tables):
            raise ConfigError(_foreign(path, app_id, tables) + "; give a new path")


@contextlib.contextmanager
def _read_only(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection that cannot write (SQLite's ``mode=ro``); a file SQLite cannot read is one ConfigError."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_WAIT)
        try:
            yield db
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        raise ConfigError(_unusable(path, exc, waited=BUSY_WAIT, verb="cannot be read")) from None


def _unusable(path: Path, exc: sqlite3.DatabaseError, *, waited: float, verb: str) -> str:
    """Why a store could not be used: a lock another process holds reads as one, not as a damaged file."""
    if getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return (f"results store {path} is locked by another process (waited {waited:g} s): another vflpriv command "
                "writing to it, or a program holding it open in a transaction; let it finish or give another --store")
    return f"results store {path} {verb} as a SQLite database ({exc})"


def checked_record(key: str, text: str) -> RunRecord:
    """The record stored under ``key``, or ValueError saying what is wrong with it."""
    record, problem = stored(key, text, lists=True)
    if problem:
        raise ValueError(f"the stored record of run {key} is damaged: {problem}")
    return record


def _identity(db: sqlite3.Connection) -> tuple[int, list[str]]:
    app_id = db.execute("PRAGMA application_id").fetchone()[0]
    return app_id, sorted(r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))


def _foreign(path: Path, app_id: int, tables: list[str]) -> str:
    if app_id == 0 and not tables:
        return f"results store {path} is an empty SQLite database, not a vflpriv results store"
    what = f"application id {app_id:#x}" if app_id else f"tables: {', '.join(tables)}"
    return f"results store {path} is another program's SQLite database ({what}), not a vflpriv results store"
