"""Two commands writing one ``--out`` at once: the results.csv another experiment wrote there while this one ran is
not replaced (the check before training cannot see it), one ``error:`` line says so, and this command's runs stay
in the store for the same command to report without training."""

from __future__ import annotations

import csv
from pathlib import Path

from cli_helpers import one_error_line
from typer.testing import CliRunner

from vflpriv.cli import app
from vflpriv.tradeoff import sweep as sweeping

EVALUATE = ["evaluate", "--method", "splitnn", "--attack", "mc", "--defense", "none", "--seeds", "0",
            "--set", "partition.labeled=60", "--set", "partition.aux=20", "--set", "finetune.epochs=1",
            "--set", "attack.prior=none"]
WIDER = [*EVALUATE[:8], "0,1", *EVALUATE[9:]]  # the same experiment widened to seeds 0, 1


def test_a_results_csv_written_by_another_command_while_this_one_trained_is_not_replaced(tmp_path, monkeypatch):
    out = tmp_path / "o"
    real = sweeping.sweep

    def meanwhile(*args, **kwargs):  # the other command finishes first and writes its results.csv
        (out / "results.csv").write_text("key,method\nfeedfacefeedfacefeed,splitnn\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(sweeping, "sweep", meanwhile)
    result = CliRunner().invoke(app, [*EVALUATE, "--out", str(out)])
    monkeypatch.setattr(sweeping, "sweep", real)
    assert result.exit_code == 2, result.output
    one_error_line(result.output[result.output.index("error: "):], "holds another experiment's results")
    with (out / "results.csv").open() as f:
        assert [row["key"] for row in csv.DictReader(f)] == ["feedfacefeedfacefeed"]  # the other's, kept
    again = CliRunner().invoke(app, [*EVALUATE, "--out", str(out), "--overwrite"])
    assert again.exit_code == 0 and "1 already in the store, 0 to run" in again.output, again.output


def test_a_results_csv_write_interrupted_halfway_leaves_the_last_one_and_the_same_command_resumes(tmp_path, monkeypatch):
    """Ctrl-C while results.csv was written left half a file, which the same command then read as another
    experiment's results and refused without --overwrite; it is written to a temporary name and renamed."""
    import pandas as pd

    out = tmp_path / "o"
    assert CliRunner().invoke(app, [*EVALUATE, "--out", str(out)]).exit_code == 0
    first = (out / "results.csv").read_text()
    real = pd.DataFrame.to_csv

    def interrupted(self, path, *args, **kwargs):
        text = real(self, None, *args, **kwargs)
        Path(path).write_text(text[: len(text) // 2])
        raise KeyboardInterrupt

    monkeypatch.setattr(pd.DataFrame, "to_csv", interrupted)
    CliRunner().invoke(app, [*WIDER, "--out", str(out)])
    monkeypatch.setattr(pd.DataFrame, "to_csv", real)
    assert (out / "results.csv").read_text() == first and [p.name for p in out.iterdir() if ".tmp" in p.name] == []
    again = CliRunner().invoke(app, [*WIDER, "--out", str(out)])
    assert again.exit_code == 0 and "2 already in the store, 0 to run" in again.output, again.output


def test_the_check_after_training_names_the_store_and_how_to_report_its_runs(tmp_path, monkeypatch):
    """It said "give another --out", but the store defaults to OUT/results.sqlite: a new --out is an empty store that
    trains everything again (review s10, finding 3). It names the store, and --store with another --out resumes."""
    out, other = tmp_path / "o", tmp_path / "other"
    real = sweeping.sweep

    def meanwhile(*args, **kwargs):
        (out / "results.csv").write_text("key,method\nfeedfacefeedfacefeed,splitnn\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(sweeping, "sweep", meanwhile)
    result = CliRunner().invoke(app, [*EVALUATE, "--out", str(out)])
    monkeypatch.setattr(sweeping, "sweep", real)
    store = out / "results.sqlite"
    line = result.output[result.output.index("error: "):]
    one_error_line(line, f"this command's runs are kept in {store}")
    assert f"--out OTHER --store {store}" in line and "--overwrite" in line and "give another --out" not in line
    again = CliRunner().invoke(app, [*EVALUATE, "--out", str(other), "--store", str(store)])
    assert again.exit_code == 0 and "1 already in the store, 0 to run" in again.output, again.output
