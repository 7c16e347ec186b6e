"""The repository holds the project, not a run's output: every command's default output folder is ignored by git, and
no results store or results table is tracked outside the recorded benchmarks, and the store's file name is written
once."""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest
import typer.main

from vflpriv.cli import app
from vflpriv.store.folders import DEFAULT_OUT, STORE_NAME

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
    outs["reproduce"] = DEFAULT_OUT["reproduce"].format(name="fedhssl-table4", quick="-quick")  # one per analogue
    return outs


def test_every_command_s_default_output_folder_is_its_entry_of_default_out():
    """One place names them: a command's own literal (reproduce's f-string) drifts from the rest."""
    commands = typer.main.get_command(app).commands
    with_out = {name for name, command in commands.items() if any(p.name == "out" for p in command.params)}
    assert with_out == set(DEFAULT_OUT)
    for name in with_out - {"reproduce"}:
        (param,) = [p for p in commands[name].params if p.name == "out"]
        assert str(param.default) == DEFAULT_OUT[name]
    (param,) = [p for p in commands["reproduce"].params if p.name == "out"]
    assert DEFAULT_OUT["reproduce"].format(name="NAME", quick="[-quick]") in param.help


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


def _non_docstring_strings(tree: ast.AST):
    """Every string constant of ``tree`` but its docstrings."""
    docs = {id(body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and (body := node.body) and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)}
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_the_store_s_file_name_is_written_once():
    """Code outside the store module names the store by ``STORE_NAME``/``default_store``, never by hand."""
    tracked = subprocess.run([GIT, "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    own = "vflpriv/store/folders.py"
    by_hand = [f"{path}:{n.lineno}" for path in tracked.split() if not path.startswith("tests/") and path != own
               for n in _non_docstring_strings(ast.parse((ROOT / path).read_text())) if STORE_NAME in n.value]
    assert by_hand == []
