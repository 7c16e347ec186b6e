"""Faults a real sweep meets: ``kill -9`` of the parent of a ``--jobs 2`` sweep, Ctrl-C, and two sweeps on
one store. Real processes through ``python -m vflpriv``; tiny data, so each training takes about a second."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

FAST = ["--set", "finetune.epochs=30", "--set", "attack.prior=none", "--set", "model.hidden=32",
        "--set", "model.out_dim=16", "--set", "attack.options.epochs=10", "--seeds", "0"]


def _command(out: Path, strengths: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "vflpriv", "evaluate", "--strengths", strengths, "--out", str(out), *FAST, *extra]


def _start(command: list[str], tmp_path: Path) -> subprocess.Popen:
    """A sweep in its own process group with SIGINT handled, as a terminal would start it."""
    env = dict(os.environ, VFLPRIV_CACHE=str(tmp_path / "cache"))
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _run(command: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, VFLPRIV_CACHE=str(tmp_path / "cache"))
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


def _rows(store: Path) -> list[tuple]:
    if not store.exists():
        return []
    try:
        with sqlite3.connect(store, timeout=30) as db:
            return db.execute("SELECT key, status, updated FROM runs ORDER BY key").fetchall()
    except sqlite3.OperationalError:  # not created yet
        return []


def _wait_for_rows(store: Path, n: int, proc: subprocess.Popen, timeout: float = 120) -> list[tuple]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        rows = _rows(store)
        if len(rows) >= n:
            return rows
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    pytest.fail(f"no {n} stored runs after {timeout} s")


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return out


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper holds no memory and counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _all_gone(pids: list[int], within: float) -> bool:
    deadline = time.time() + within
    while time.time() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.1)
    return False


def test_kill_9_of_a_jobs_2_sweep_loses_nothing_duplicates_nothing_and_leaves_no_workers(tmp_path):
    out = tmp_path / "out"
    command = _command(out, "1,2,3,4", "--jobs", "2")
    proc = _start(command, tmp_path)
    before = _wait_for_rows(out / "results.sqlite", 1, proc)
    workers = _children(proc.pid)
    assert workers, "a --jobs 2 sweep runs worker processes"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert _all_gone(workers, within=5), [p for p in workers if _alive(p)]
    resumed = _run(command, tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    after = _rows(out / "results.sqlite")
    assert len(after) == 4 and {status for _, status, _ in after} == {"ok"}
    kept = {key: updated for key, _, updated in after}
    assert all(kept[key] == updated for key, _, updated in before)  # finished before the kill: not recomputed
    frame = pd.read_csv(out / "results.csv")
    assert sorted(frame["strength"]) == [1, 2, 3, 4] and frame["key"].is_unique


def test_ctrl_c_exits_130_with_one_line_and_leaves_no_workers(tmp_path):
    out = tmp_path / "out"
    proc = _start(_command(out, "1,2,3,4", "--jobs", "2"), tmp_path)
    _wait_for_rows(out / "results.sqlite", 1, proc)
    workers = _children(proc.pid)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends: the whole foreground process group
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130
    lines = [line for line in stderr.splitlines() if line.strip() and not line.startswith("runs ")]  # progress aside
    assert len(lines) == 1 and lines[0].startswith("error: interrupted; the finished runs are kept in"), stderr
    assert _all_gone(workers, within=5)
    assert {status for _, status, _ in _rows(out / "results.sqlite")} == {"ok"}


@pytest.mark.parametrize("to_group", [False, True], ids=["kill PID", "kill the process group"])
def test_sigterm_ends_a_sweep_as_ctrl_c_does_and_the_rerun_resumes(to_group, tmp_path):
    """``kill`` (a scheduler's stop) reads as Ctrl-C: one line, exit 130, workers gone, the finished runs kept."""
    out = tmp_path / "out"
    command = _command(out, "1,2,3,4", "--jobs", "2")
    proc = _start(command, tmp_path)
    before = _wait_for_rows(out / "results.sqlite", 1, proc)
    workers = _children(proc.pid)
    (os.killpg if to_group else os.kill)(proc.pid, signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    lines = [line for line in stderr.splitlines() if line.strip() and not line.startswith("runs ")]
    assert len(lines) == 1 and lines[0].startswith("error: interrupted; the finished runs are kept in"), stderr
    assert _all_gone(workers, within=5)
    kept = {key: updated for key, _, updated in _rows(out / "results.sqlite")}
    assert all(kept[key] == updated for key, _, updated in before)
    resumed = _run(command, tmp_path)
    assert resumed.returncode == 0 and f"{len(kept)} already in the store" in resumed.stdout, resumed.stderr


def test_a_reader_that_goes_away_silences_the_output_and_loses_nothing(tmp_path):
    """``vflpriv evaluate ... | head -1``: the header is read, the pipe closed; the sweep goes on quietly (no
    traceback, no "Exception ignored") and writes its store, results.csv, cap.csv and figure."""
    out = tmp_path / "out"
    proc = _start(_command(out, "1,2,3", "--jobs", "2"), tmp_path)
    assert proc.stdout.readline().startswith("splitnn on digits")
    proc.stdout.close()  # as head -1 exits
    stderr = proc.stderr.read()
    proc.wait(timeout=300)
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr and "Exception" not in stderr and "Broken" not in stderr, stderr
    assert {status for _, status, _ in _rows(out / "results.sqlite")} == {"ok"}
    assert len(_rows(out / "results.sqlite")) == 3
    assert all((out / name).is_file() for name in ("results.csv", "cap.csv", "tradeoff.png"))


def test_two_concurrent_sweeps_on_one_store_each_list_their_own_runs(tmp_path):
    store = tmp_path / "shared.sqlite"
    a = _start(_command(tmp_path / "a", "1,2,3", "--store", str(store), "--jobs", "1"), tmp_path)
    b = _start(_command(tmp_path / "b", "2,3,4", "--store", str(store), "--jobs", "1"), tmp_path)
    for proc in (a, b):
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    assert sorted(pd.read_csv(tmp_path / "a" / "results.csv")["strength"]) == [1, 2, 3]
    assert sorted(pd.read_csv(tmp_path / "b" / "results.csv")["strength"]) == [2, 3, 4]
    shared = pd.merge(pd.read_csv(tmp_path / "a" / "results.csv"), pd.read_csv(tmp_path / "b" / "results.csv"),
                      on="key", suffixes=("_a", "_b"))
    assert len(shared) == 2 and (shared["utility_a"] == shared["utility_b"]).all()
    assert len(_rows(store)) == 4
