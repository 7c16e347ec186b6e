"""The default store and output folders, written once (``vflpriv.store.folders``): a command without --out writes
its runs to vflpriv-out/results.sqlite, which --store names for another --out and the readers find in the folder, and
the Python API writes where the commands do."""

from __future__ import annotations

import inspect
from pathlib import Path

from test_concurrent_out import EVALUATE
from typer.testing import CliRunner

import vflpriv
from vflpriv.cli import app


def test_a_command_without_out_keeps_its_runs_in_vflpriv_out_results_sqlite(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path / "cache"))
    assert CliRunner().invoke(app, EVALUATE).exit_code == 0
    assert sorted(p.name for p in Path("vflpriv-out").glob("results.*")) == ["results.csv", "results.sqlite"]
    again = CliRunner().invoke(app, [*EVALUATE, "--out", "other", "--store", "vflpriv-out/results.sqlite"])
    assert "1 already in the store, 0 to run" in again.output, again.output
    assert len(vflpriv.load_results("vflpriv-out")) == 1  # the folder's store, found by its name
    defaults = {name: inspect.signature(f).parameters["out"].default for name, f in
                (("evaluate", vflpriv.evaluate), ("sweep", vflpriv.sweep))}
    assert defaults == {"evaluate": "vflpriv-out", "sweep": "vflpriv-sweep"}
    helps = {c: CliRunner().invoke(app, [c, "--help"], terminal_width=200).output for c in ("evaluate", "sweep")}
    assert all(f"[default: {defaults[c]}]" in " ".join(h.split()) for c, h in helps.items()), helps
