"""Helpers of the bad-input tests: one error line, and nothing written."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def one_error_line(output: str, needle: str) -> None:
    """The output is exactly one ``error:`` line holding ``needle``, and no traceback."""
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert lines[0].startswith("error: ") and needle in lines[0], lines[0]
    assert "Traceback" not in output


@contextlib.contextmanager
def wrote_nothing(*roots: Path):
    """Fails when anything appeared or changed under ``roots`` (the test's folder, the working directory, the
    pretraining cache) while it was open."""

    def tree() -> dict[str, int]:
        return {str(p): p.stat().st_mtime_ns for r in roots if r.exists() for p in sorted(r.rglob("*"))}

    before = tree()
    yield
    after = tree()
    assert after == before, sorted(set(after) ^ set(before)) or "a file changed"


def planned(args: list[str], folder: Path, monkeypatch):
    """The result of ``vflpriv ARGS --dry-run`` run in ``folder``, which writes nothing there nor in the cache."""
    from typer.testing import CliRunner

    from vflpriv.cli import app

    monkeypatch.chdir(folder)
    with wrote_nothing(folder, Path(os.environ["VFLPRIV_CACHE"])):
        return CliRunner().invoke(app, [*args, "--dry-run"])


def refused_in_planning(args: list[str], needle: str, folder: Path, monkeypatch) -> str:
    """``vflpriv ARGS --dry-run`` run in ``folder``: exit 2, one ``error:`` line holding ``needle``, nothing written
    there nor in the cache; its output."""
    result = planned(args, folder, monkeypatch)
    assert result.exit_code == 2, result.output
    one_error_line(result.output, needle)
    return result.output
