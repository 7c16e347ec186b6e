"""A ``vflpriv`` command (default: the default audit's ``--dry-run``) under two checkouts interleaved: the CPU ratio.

The base revision is exported and imported by ``PYTHONPATH`` as ``table_report_cost.py`` does; each repeat runs
both, in alternating order, each in a fresh process, and takes the children's CPU seconds.

    python benchmarks/dry_run_cost.py [--base main] [--repeats 3] [-- vflpriv arguments, --out excluded]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from table_report_cost import ROOT, assemble, export  # noqa: E402 - this folder's own helper

DEFAULT = ["audit", "--method", "splitnn", "--dry-run"]


def run(path: Path, args: list[str], out: Path) -> float:
    """CPU seconds of ``vflpriv ARGS --out OUT`` importing vflpriv from ``path``; exits where it fails."""
    check = subprocess.run([sys.executable, "-c", "import vflpriv.runner.planning as p, vflpriv.attacks.search as s; "
                            "print(p.__file__, s.__file__)"], env={**os.environ, "PYTHONPATH": str(path)},
                           capture_output=True, text=True, cwd=out.parent)
    if not all(f.startswith(str(path)) for f in check.stdout.split()) or not check.stdout:
        sys.exit(f"error: vflpriv under {path} imports {check.stdout.strip() or check.stderr[-500:]} instead")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "vflpriv", *args, "--out", str(out)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(path), "MPLBACKEND": "Agg"}, cwd=out.parent)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        sys.exit(f"error: vflpriv {' '.join(args)} under {path} failed:\n{done.stdout[-1000:]}{done.stderr[-1000:]}")
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", default="main", help="git revision to compare with (default main)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("command", nargs="*", help="vflpriv's arguments (default: the default audit, --dry-run)")
    args = parser.parse_args()
    command = args.command or DEFAULT
    with tempfile.TemporaryDirectory(prefix="dry-run-cost-") as tmp:
        tmp = Path(tmp)
        sides = {"base": assemble(export(args.base, tmp / "base"), tmp / "base" / "path"),
                 "new": assemble(ROOT, tmp / "new" / "path")}
        cpu: dict[str, list[float]] = {side: [] for side in sides}
        for repeat in range(args.repeats):
            for side in sides if repeat % 2 == 0 else reversed(sides):
                cpu[side].append(run(sides[side], command, tmp / f"{side}-{repeat}"))
        print(f"# vflpriv {' '.join(command)}: {args.base} against this checkout, {args.repeats} repeats interleaved\n")
        print("| base CPU s | new CPU s | CPU ratio new/base |\n|---|---|---|")
        print(f"| {' '.join(f'{s:.1f}' for s in cpu['base'])} | {' '.join(f'{s:.1f}' for s in cpu['new'])} | "
              f"{sum(cpu['new']) / sum(cpu['base']):.2f} |")


if __name__ == "__main__":
    main()
