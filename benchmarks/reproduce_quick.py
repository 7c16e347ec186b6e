"""Every shipped analogue's ``vflpriv reproduce NAME --quick`` at the budget it ships with, end to end and resumed.

The test suite (tests/cli/test_reproduce.py) runs each --quick with its attacks at 5 epochs and, where no claim counts
the finetuning's messages, 2 finetuning epochs; this runs the shipped settings (attacks at 50 epochs, the preset's
finetuning) and prints per analogue its exit status, seconds, the verdicts its report printed and the rerun's
"0 to run" (about 2 minutes on one core).

    python benchmarks/reproduce_quick.py [--names fedhssl-table4,...]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from typer.testing import CliRunner

from vflpriv.cli import app
from vflpriv.workflows import reproductions


def run(name: str, root: Path) -> str:
    """One analogue's shipped --quick run and its rerun, as one line."""
    os.environ["VFLPRIV_CACHE"] = str(root / name / "cache")
    args = ["reproduce", name, "--quick", "--out", str(root / name / "out"), "--jobs", "1"]
    start = time.perf_counter()
    first = CliRunner().invoke(app, args)
    seconds = time.perf_counter() - start
    if first.exit_code != 0:
        return f"{name}: exit {first.exit_code} after {seconds:.1f} s: {first.output.strip().splitlines()[-1:]}"
    text = (root / name / "out" / "reproduction.md").read_text()
    verdicts = re.findall(r"\| \*\*(held|not held|not comparable)\*\* \|", text)
    again = CliRunner().invoke(app, args)
    resumed = again.exit_code == 0 and "0 to run" in again.output
    counts = ", ".join(f"{v} {verdicts.count(v)}" for v in sorted(set(verdicts)))
    return f"{name}: ok in {seconds:.1f} s; verdicts: {counts}; rerun trains nothing: {resumed}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", default=",".join(reproductions.names()), help="analogues, comma-separated")
    args = parser.parse_args()
    unknown = [n for n in args.names.split(",") if n not in reproductions.names()]
    if unknown:
        print(f"error: unknown analogue {unknown[0]!r}; valid analogues: {', '.join(reproductions.names())}",
              file=sys.stderr)
        sys.exit(2)
    with tempfile.TemporaryDirectory() as root:
        for name in args.names.split(","):
            print(run(name, Path(root)), flush=True)


if __name__ == "__main__":
    main()
