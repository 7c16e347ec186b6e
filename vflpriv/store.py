"""The results store: one SQLite row per run, keyed by the hash of its configuration.

Every finished run is committed at once, so a killed sweep loses nothing and, run again, skips the
keys already done. Failed runs are kept with their error and retried on the next sweep.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from vflpriv.records import RunRecord

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    key TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    record TEXT NOT NULL,
    updated TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
)
"""


class Store:
    """SQLite-backed map from run key to :class:`RunRecord`."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path)
        self._db.execute(_SCHEMA)
        self._db.commit()

    def done(self, key: str) -> bool:
        row = self._db.execute("SELECT status FROM runs WHERE key = ?", (key,)).fetchone()
        return row is not None and row[0] == "ok"

    def put(self, record: RunRecord) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO runs (key, status, record) VALUES (?, ?, ?)",
            (record.key, record.status, json.dumps(record.to_dict())),
        )
        self._db.commit()

    def get(self, key: str) -> RunRecord | None:
        row = self._db.execute("SELECT record FROM runs WHERE key = ?", (key,)).fetchone()
        return RunRecord(**json.loads(row[0])) if row else None

    def forget(self, keys: list[str]) -> int:
        """Delete these runs (so the next sweep recomputes them, e.g. after the code they measure changed)."""
        n = self._db.executemany("DELETE FROM runs WHERE key = ?", [(k,) for k in keys]).rowcount
        self._db.commit()
        return n

    def all(self) -> list[RunRecord]:
        return [RunRecord(**json.loads(r[0])) for r in self._db.execute("SELECT record FROM runs ORDER BY key")]

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
