"""Paths the system refuses to look at (issue 50, item 3): a name longer than the file system allows, a whole path
longer than PATH_MAX (ENAMETOOLONG), a file where a folder is wanted, a folder that cannot be written: one ``error:``
line, exit 2, nothing written, for every path a user gives (--out, --store, table/report STORE, dataset.root)."""

from __future__ import annotations

import pytest
from cli_helpers import one_error_line, wrote_nothing
from typer.testing import CliRunner

from vflpriv.cli import app

LONG_NAME = "a" * 300  # one component past NAME_MAX (255)
DEEP = "/".join(["b" * 200] * 25)  # every component fits, the whole is past PATH_MAX (4096)
TRAIN = ["--attack", "gc", "--defense", "none", "--seeds", "0", "--set", "finetune.epochs=1"]


@pytest.mark.parametrize(("args", "needle"), [
    (["table", LONG_NAME], "is not a usable path (File name too long)"),
    (["table", "{tmp}/" + DEEP], "the system takes paths of at most 4095"),
    (["report", LONG_NAME], "is not a usable path (File name too long)"),
    (["report", "{tmp}/" + DEEP], "the system takes paths of at most 4095"),
    (["evaluate", *TRAIN, "--out", "{tmp}/" + DEEP], "the system takes paths of at most 4095"),
    (["evaluate", *TRAIN, "--out", LONG_NAME], "is 300 bytes; the file system allows"),
    (["evaluate", *TRAIN, "--out", "o", "--store", "{tmp}/" + DEEP + "/s.sqlite"], "the system takes paths of at most"),
    (["evaluate", *TRAIN, "--out", "o", "--store", LONG_NAME + ".sqlite"], "is 307 bytes; the file system allows"),
    (["audit", "--method", "splitnn", "--attacks", "gc", "--defenses", "none", "--out", "{tmp}/" + DEEP],
     "the system takes paths of at most 4095"),
    (["evaluate", *TRAIN, "--set", "dataset.name=letter", "--set", "dataset.root=" + LONG_NAME],
     "dataset.root aaaa"),
    (["evaluate", *TRAIN, "--set", "dataset.name=letter", "--set", "dataset.root={tmp}/" + DEEP],
     "the system takes paths of at most 4095"),
    (["evaluate", *TRAIN, "--out", "{tmp}/file/o"], "{tmp}/file is a file, not a folder"),
    (["table", "{tmp}/file/results.sqlite"], "no results store at {tmp}/file/results.sqlite"),
    (["evaluate", *TRAIN, "--out", "/proc/vflpriv-out"], "cannot be created: /proc is not writable"),
])
def test_an_unusable_path_is_one_error_line_and_nothing_is_written(args, needle, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path / "cache"))
    (tmp_path / "file").write_text("not a folder")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    with wrote_nothing(tmp_path):
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    one_error_line(result.output, needle.replace("{tmp}", str(tmp_path)))
    assert len(result.output) < 400  # a path of thousands of characters is shown shortened
