"""The local process pool's housekeeping: what its helper processes may print."""

from __future__ import annotations

import os
import subprocess
import sys

from vflpriv.tradeoff import executors


def test_processes_started_after_the_pool_do_not_print_the_resource_trackers_exit_notes(monkeypatch):
    """loky's resource tracker inherits the environment of the pool's start; its "leaked semlock objects to clean up"
    note after a refused command stopped the pre-started workers is silenced there, every other warning is not."""
    monkeypatch.setenv("PYTHONWARNINGS", "default")
    executors._quiet_resource_tracker()
    executors._quiet_resource_tracker()  # idempotent
    assert os.environ["PYTHONWARNINGS"] == f"default,{executors.QUIET_TRACKER}"
    child = subprocess.run(
        [sys.executable, "-c", "import warnings; warnings.warn('resource_tracker: There appear to be 1 leaked semlock "
         "objects to clean up at shutdown'); warnings.warn('another warning')"],
        capture_output=True, text=True, check=True)
    assert "leaked semlock" not in child.stderr and "another warning" in child.stderr


def test_the_parent_runs_on_idle_once_while_a_worker_still_computes():
    """``run_all``'s ``on_idle``: once this process has no item left to take while a worker still computes (the
    report's imports then cost no time of their own), never with one process (nothing to wait for)."""
    import time

    results, idle = [], []
    executors.run_all(time.sleep, [1.5, 0.0], jobs=2, on_result=results.append,
                      on_idle=lambda: idle.append(len(results)))
    assert idle == [1] and len(results) == 2  # after its own item, before the worker's
    idle.clear()
    executors.run_all(time.sleep, [0.0, 0.0], jobs=1, on_result=results.append, on_idle=lambda: idle.append(0))
    assert idle == []
