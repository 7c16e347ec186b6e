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


def test_the_parent_prepares_once_when_no_more_items_wait_than_workers_compute():
    """``run_all``'s ``on_tail``: once, in this process, as soon as the items left are no more than the workers busy
    (the report's imports then overlap the workers' last items); what is still left it then takes; never with one
    process (no worker to overlap)."""
    import time

    results, tail = [], []
    # the worker gets the first item; one waits, one worker computes: this process prepares, then takes it
    executors.run_all(time.sleep, [1.5, 0.0], jobs=2, on_result=results.append,
                      on_tail=lambda: tail.append(len(results)))
    assert tail == [0] and len(results) == 2
    tail.clear()
    results.clear()
    # three wait while one worker computes: this process takes two first, then prepares once
    executors.run_all(time.sleep, [1.5, 0.0, 0.0, 0.0], jobs=2, on_result=results.append,
                      on_tail=lambda: tail.append(len(results)))
    assert tail == [2] and len(results) == 4
    tail.clear()
    executors.run_all(time.sleep, [0.0, 0.0], jobs=1, on_result=results.append, on_tail=lambda: tail.append(0))
    assert tail == []


def test_every_result_is_handed_on_before_run_all_returns():
    """Review hunt3 P5: ``run_all`` returned while a worker's last result was still being handed on (a sweep's commit),
    so the sweep read that run back from the store as one another sweep computed meanwhile."""
    import time

    handed = []

    def slowly(result: int) -> None:  # as a store's commit that waits for the disk
        time.sleep(0.5)
        handed.append(result)

    executors.run_all(abs, [-1, -2], jobs=2, on_result=slowly)  # the worker's result arrives while this one's is handed
    assert sorted(handed) == [1, 2]
