"""The repository holds the project, not a run's output: every command's default output folder is ignored by git, and
no results store or results table is tracked outside the recorded benchmarks."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import typer.main

from vflpriv.cli import app

ROOT = Path(__file__).resolve().parents[2]
GIT = shutil.which("git")
pytestmark = pytest.mark.skipif(GIT is None or not (ROOT / ".git").exists(), reason="needs a git checkout and git")


def _default_outs() -> dict[str, str]:
    """Each command's default --out, as its help shows it."""
    outs = {}
    for name, command in typer.main.get_command(app).commands.items():
        for param in command.params:
            if param.name == "out" and param.default is not None:
                outs[name] = str(param.default)
    outs["reproduce"] = "vflpriv-reproduce-fedhssl-table4-quick"  # named per analogue: vflpriv-reproduce-NAME[-quick]
    return outs


def test_every_default_output_folder_is_ignored_by_git():
    outs = _default_outs()
    assert {"evaluate", "sweep", "audit", "tune", "table", "report"} <= set(outs)
    for command, out in outs.items():
        for where in (out, f"examples/{out}"):  # wherever a user runs the command from
            found = subprocess.run([GIT, "check-ignore", "-q", f"{where}/results.sqlite"], cwd=ROOT)
            assert found.returncode == 0, f"{command}'s default --out {where} is not in .gitignore"


def test_no_run_output_is_tracked_outside_the_recorded_benchmarks():
    tracked = subprocess.run([GIT, "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    outputs = [p for p in tracked if Path(p).name in ("results.sqlite", "results.csv", "cap.csv", "tradeoff.png")
               and not p.startswith(("benchmarks/results/", "tests/"))]
    assert outputs == []
