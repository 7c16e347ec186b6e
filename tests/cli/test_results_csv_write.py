"""results.csv's write (review s10, finding 5): each write has a temporary file of its own (two writers in one process
shared one: FileNotFoundError), a temporary file a hard kill left is cleaned, a write the system refuses (Windows:
results.csv open in Excel) is one ``error:`` line naming the store that keeps the runs, and ``tune`` checks, before
each write, that no other experiment's results.csv appeared in --out meanwhile."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pandas as pd
from cli_helpers import one_error_line
from test_concurrent_out import EVALUATE
from typer.testing import CliRunner

from vflpriv.cli import app
from vflpriv.store import folders
from vflpriv.tradeoff import sweep as sweeping


def test_two_writers_in_one_process_each_write_a_whole_file(tmp_path, monkeypatch):
    path, both = tmp_path / "results.csv", threading.Barrier(2, timeout=10)
    real = pd.DataFrame.to_csv

    def together(self, target, *args, **kwargs):  # both have written their temporary file before either renames
        real(self, target, *args, **kwargs)
        both.wait()

    monkeypatch.setattr(pd.DataFrame, "to_csv", together)
    errors = []

    def write(n: int) -> None:
        try:
            folders.write_csv_atomically(pd.DataFrame({"key": [str(n)] * 3}), path)
        except Exception as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and path.read_text() in ("key\n1\n1\n1\n", "key\n2\n2\n2\n")
    assert [p.name for p in tmp_path.iterdir()] == ["results.csv"]


def test_a_temporary_file_a_hard_kill_left_is_cleaned_and_a_live_one_kept(tmp_path):
    path = tmp_path / "results.csv"
    stale, live = tmp_path / ".results.csv.4242.tmp", tmp_path / ".results.csv.abcd1234.tmp"
    for left in (stale, live):
        left.write_text("key\nhalf")
    hour_ago = time.time() - 3600
    os.utime(stale, (hour_ago, hour_ago))
    folders.write_csv_atomically(pd.DataFrame({"key": ["a"]}), path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [live.name, "results.csv"]


def test_an_old_file_of_the_user_named_alike_is_never_removed(tmp_path):
    """Only vflpriv's own temporary names (mkstemp's eight characters, or a pid) are cleaned, never a user's file."""
    path = tmp_path / "results.csv"
    notes = tmp_path / ".results.csv.my-notes.tmp"
    notes.write_text("mine")
    hour_ago = time.time() - 3600
    os.utime(notes, (hour_ago, hour_ago))
    folders.write_csv_atomically(pd.DataFrame({"key": ["a"]}), path)
    assert notes.read_text() == "mine"


def test_results_csv_gets_the_mode_a_file_written_in_place_would(tmp_path, monkeypatch):
    """mkstemp's files are the owner's alone (0600): results.csv is read by others as any file the umask allows."""
    monkeypatch.setattr(folders, "_UMASK", 0o022)
    path = tmp_path / "results.csv"
    folders.write_csv_atomically(pd.DataFrame({"key": ["a"]}), path)
    assert path.stat().st_mode & 0o777 == 0o644


def test_a_refused_write_is_one_error_line_naming_the_store_and_the_runs_stay(tmp_path, monkeypatch):
    out = tmp_path / "o"

    def locked(self, target):  # Windows, results.csv open in Excel
        raise PermissionError(13, "Permission denied", str(target))

    monkeypatch.setattr(Path, "replace", locked)
    result = CliRunner().invoke(app, [*EVALUATE, "--out", str(out)])
    monkeypatch.undo()
    assert result.exit_code == 2, result.output
    line = result.output[result.output.index("error: "):]
    one_error_line(line, f"could not write {out / 'results.csv'} (Permission denied)")
    assert f"the runs are kept in {out / 'results.sqlite'}" in line
    assert not (out / "results.csv").exists() and [p.name for p in out.iterdir() if ".tmp" in p.name] == []
    again = CliRunner().invoke(app, [*EVALUATE, "--out", str(out)])
    assert again.exit_code == 0 and "1 already in the store, 0 to run" in again.output, again.output


def test_tune_does_not_replace_a_results_csv_another_command_wrote_while_it_trained(tmp_path, monkeypatch):
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "t"
    real = sweeping.sweep

    def meanwhile(*args, **kwargs):
        (out / "results.csv").write_text("key,method\nfeedfacefeedfacefeed,splitnn\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(sweeping, "sweep", meanwhile)
    result = CliRunner().invoke(app, ["tune", "--method", "splitnn", "--attack", "gc", "--defense", "iso", "--seeds",
                                      "0", "--steps", "0", "--tolerance", "1", "--out", str(out), "--set",
                                      "attack.prior=aux", "--set", "attack.prior_epochs=2", "--set", "finetune.epochs=1",
                                      "--set", "model.hidden=16", "--set", "model.out_dim=8", "--jobs", "1"])
    assert result.exit_code == 2, result.output
    one_error_line(result.output[result.output.index("error: "):], "holds another experiment's results")
    assert (out / "results.csv").read_text() == "key,method\nfeedfacefeedfacefeed,splitnn\n"


def test_an_audit_s_refused_write_says_what_its_rerun_trains_again(tmp_path, monkeypatch):
    """It said "nothing is trained again", but an audit's rerun runs its conformance checks, which train: the stored
    runs are what is not trained again."""
    from vflpriv.workflows import experiment

    out = tmp_path / "a"
    audit = ["audit", "--method", "splitnn", "--attacks", "gc", "--defenses", "none", "--seeds", "0", "--canaries", "0",
             "--no-tune-attacks", "--set", "finetune.epochs=1", "--set", "partition.labeled=60", "--set",
             "audit.prior=aux", "--set", "audit.prior_epochs=2", "--out", str(out), "--jobs", "1"]

    def locked(frame, path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(experiment, "write_csv_atomically", locked)
    result = CliRunner().invoke(app, audit)
    monkeypatch.undo()
    line = result.output[result.output.index("error: "):]
    one_error_line(line, f"the runs are kept in {out / 'results.sqlite'}")
    assert line.rstrip().endswith("(the runs kept there are not trained again)") and "nothing is" not in line
    again = " ".join(CliRunner().invoke(app, audit).output.split())
    assert "conformance of splitnn: declared traffic" in again and "1 already in the store, 0 to run" in again, again
