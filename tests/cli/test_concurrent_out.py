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
