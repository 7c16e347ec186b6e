"""Run a grid of configurations into the store, skipping runs already done, and collect the records."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from vflpriv.config import RunConfig
from vflpriv.errors import VflprivError
from vflpriv.records import RunRecord
from vflpriv.run import blank_record, execute, plan
from vflpriv.store import Store
from vflpriv.tradeoff.executors import map_unordered


def check(configs: list[RunConfig]) -> None:
    """Resolve and validate every run before any training: bad input fails fast, nothing half-done."""
    for config in configs:
        plan(config)


def run_safely(config: RunConfig) -> RunRecord:
    """Run one config; an unexpected failure becomes a ``failed`` record instead of ending the sweep."""
    try:
        return execute(plan(config))
    except VflprivError:
        raise
    except Exception as exc:  # noqa: BLE001 - recorded, reported, retried on resume
        record = blank_record(config)
        record.status, record.error = "failed", f"{type(exc).__name__}: {exc}"
        return record


def sweep(
    configs: list[RunConfig],
    store: Store,
    *,
    jobs: int = 1,
    backend: str = "loky",
    address: str | None = None,
    on_done: Callable[[RunRecord], None] | None = None,
    checked: bool = False,
) -> pd.DataFrame:
    """Validate every config first (unless ``checked``), then run the ones the store does not hold.

    Each record is committed to the store as soon as it arrives; the returned frame holds one row
    per config, in grid order, including runs found already done in the store.
    """
    if not checked:
        check(configs)
    todo = [c for c in configs if not store.done(c.key())]
    jobs = max(1, min(jobs, len(todo)))  # one pending run needs no worker pool
    for record in map_unordered(run_safely, todo, jobs=jobs, backend_name=backend, address=address):
        store.put(record)
        if on_done is not None:
            on_done(record)
    records = [store.get(c.key()) for c in configs]
    return pd.DataFrame([r.to_dict() for r in records], columns=RunRecord.columns())
