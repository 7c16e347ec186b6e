"""The results store: one SQLite row per (training, attack) run, keyed by the hash of its configuration.

Every finished training's records are committed at once, so a killed sweep loses nothing and, run
again, skips the keys already done; failed runs are kept with their error and retried by the next
sweep. Sweeps sharing a store never compute one training twice: a sweep *claims* a training before it
runs it (a row in ``claims`` with a lease it keeps renewing); another sweep skips a live claim and
waits for its records, and takes over a claim whose lease expired or whose process died on this host.

The file is marked with SQLite's ``application_id``, so another program's database (or a file that is
not SQLite) is refused rather than written into (``vflpriv.store.schema``). Records are strict JSON (``json_extract``
reads them); ``vflpriv.store.reading`` reads a store without writing it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path

from vflpriv.common.errors import ConfigError
from vflpriv.store.reading import check_store_path, read_store, stored_other_canary_key, stored_other_data
from vflpriv.store.records import NOT_APPLICABLE, OK, RunRecord, stored
from vflpriv.store.schema import (APPLICATION_ID, LOCK_WAIT, SCHEMA, connect, foreign, identity, in_chunks,
                                  record_field, unusable)
from vflpriv.store.verification import checked_record

#: Importers read the store's read-only functions here too, beside the store that writes (``vflpriv.store.reading``).
__all__ = ["FINAL", "LEASE_SECONDS", "Store", "check_store_path", "read_store", "stored_other_canary_key",
           "stored_other_data"]

#: Statuses of records a rerun keeps: a failed run is retried.
FINAL = (OK, NOT_APPLICABLE)

LEASE_SECONDS = 60.0


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
            self._db = connect(self.path)
            self._open()
        except sqlite3.DatabaseError as exc:
            raise ConfigError(unusable(self.path, exc, waited=LOCK_WAIT, verb="is not usable")) from None

    def _open(self) -> None:
        """Check the file is a vflpriv store (or new) and create the schema, in one write transaction: two
        sweeps creating one store at once would otherwise see each other half-initialised (an application
        id of 0 beside tables) and refuse it as another program's database."""
        with self._transaction():
            self._init_schema()

    def _init_schema(self) -> None:
        app_id, tables = identity(self._db)
        if app_id == 0 and not tables:
            self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        elif app_id != APPLICATION_ID:
            raise ConfigError(foreign(self.path, app_id, tables) + "; give a new path")
        for statement in SCHEMA:
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

    def put_many(self, records: Iterable[RunRecord]) -> float:
        """Commit the records of one training together; returns when they are marked written."""
        now = time.time()
        rows = [(r.key, r.training_key, r.status, r.to_json(), now) for r in records]
        with self._transaction():
            self._db.executemany("INSERT OR REPLACE INTO runs (key, training_key, status, record, updated) "
                                 "VALUES (?, ?, ?, ?, ?)", rows)
        return now

    def get(self, key: str) -> RunRecord | None:
        row = self._one("SELECT record FROM runs WHERE key = ?", (key,))
        return checked_record(key, row[0]) if row else None

    def get_many(self, keys: list[str]) -> dict[str, RunRecord]:
        """The stored records of ``keys``, read in one read transaction: a training another sweep rewrites meanwhile
        reads as all its new records or all its old ones, never a mix of two trainings (review fe3 F3)."""
        with self._lock:
            self._db.execute("BEGIN")
            try:
                rows = [row for chunk, marks in in_chunks(keys)
                        for row in self._db.execute(f"SELECT key, record FROM runs WHERE key IN ({marks})", chunk)]
            finally:
                self._db.execute("COMMIT")
        return {key: checked_record(key, text) for key, text in rows}

    def final_records(self, training_key: str) -> list[RunRecord]:
        """The final records of ``training_key`` that check out, whichever command's runs they are."""
        with self._lock:
            rows = self._db.execute("SELECT key, record FROM runs WHERE training_key = ? AND status IN "
                                    f"({','.join('?' * len(FINAL))})", (training_key, *FINAL)).fetchall()
        checked = (stored(key, text, lists=True) for key, text in rows)
        return [record for record, problem in checked if not problem]

    def settled(self, keys: list[str], *, since: float, redo: Collection[str] = ()) -> set[str]:
        """Keys whose record is final (``ok``, ``n/a``), or was written (by any sweep) at or after ``since``; one of
        ``redo`` (stored before, to be recomputed) only the latter."""
        out: set[str] = set()
        for chunk, marks in in_chunks(keys):
            with self._lock:
                rows = self._db.execute(f"SELECT key, status, updated FROM runs WHERE key IN ({marks})",
                                        chunk).fetchall()
            out.update(k for k, status, updated in rows if (status in FINAL and k not in redo) or updated >= since)
        return out

    def written_since(self, keys: list[str], since: float) -> dict[str, float]:
        """When each of ``keys`` whose record was written, by any sweep, at or after ``since`` was written."""
        found: dict[str, float] = {}
        for chunk, marks in in_chunks(keys):
            with self._lock:
                rows = self._db.execute(f"SELECT key, updated FROM runs WHERE key IN ({marks}) AND updated >= ?",
                                        (*chunk, since)).fetchall()
            found.update(rows)
        return found

    def texts(self, keys: list[str]) -> Iterator[tuple[str, object]]:
        """(key, its record as stored, unchecked: ``tradeoff.gap.record_problems`` judges it) for each of ``keys`` the
        store holds, read 500 keys at a time: one chunk held at once, not the grid's (review tidy F1)."""
        for chunk, marks in in_chunks(keys):
            with self._lock:
                rows = self._db.execute(f"SELECT key, record FROM runs WHERE key IN ({marks})", chunk).fetchall()
            yield from rows  # outside the lock: a sweep's helper thread may commit meanwhile

    def field(self, keys: list[str], name: str) -> Iterator[tuple[str, object]]:
        """(key, its record's field ``name`` as SQLite reads it, ``schema.record_field``) for each of ``keys`` the store
        holds, 500 keys at a time: a check of one field that parses no record."""
        for chunk, marks in in_chunks(keys):
            with self._lock:
                rows = self._db.execute(f"SELECT key, {record_field(name)} FROM runs WHERE key IN ({marks})",
                                        chunk).fetchall()
            yield from rows

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
            db = connect(self.path)
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
