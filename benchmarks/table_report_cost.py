"""``vflpriv table`` and ``vflpriv report`` on one store, two checkouts interleaved: the same files, and the CPU ratio.

A base revision (default ``main``) is exported with ``git archive`` and imported in place of this checkout by
``PYTHONPATH`` (its ``vflpriv`` package assembled from the folders ``pyproject.toml`` maps, as the editable install
does), so both run in this venv. Each repeat runs base and this checkout in alternating order, each command in a fresh
process, and takes the children's CPU seconds (steadier than wall time on a shared machine). Every file both write
is compared byte for byte; in ``report.html`` the ``generated`` time and the vflpriv version (the base's export has no
git metadata) are masked, nothing else.

    python benchmarks/table_report_cost.py STORE [--base main] [--new HEAD] [--repeats 3]
    python benchmarks/table_report_cost.py STORE --profile table      # this checkout in-process under cProfile
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = ("table", "report")


def assemble(source: Path, into: Path) -> Path:
    """A folder holding a ``vflpriv`` package of ``source``'s files as ``pyproject.toml`` maps them (symlinks)."""
    mapping = tomllib.loads((source / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    package = into / "vflpriv"
    package.mkdir(parents=True)
    for entry in (source / mapping.pop("vflpriv")).iterdir():
        (package / entry.name).symlink_to(entry)
    for name, folder in mapping.items():
        (package / name.split(".", 1)[1]).symlink_to(source / folder, target_is_directory=True)
    return into


def export(revision: str, into: Path) -> Path:
    """``revision``'s tree under ``into/src``."""
    src = into / "src"
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    return src


def run(path: Path, command: str, store: Path, out: Path, *extra: str) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of ``vflpriv COMMAND STORE --out OUT`` importing vflpriv from ``path``."""
    check = subprocess.run([sys.executable, "-c", "import vflpriv.reports.results as r; print(r.__file__)"],
                           env={**os.environ, "PYTHONPATH": str(path)}, capture_output=True, text=True, cwd=out.parent)
    if not check.stdout.startswith(str(path)):
        sys.exit(f"error: vflpriv under {path} imports {check.stdout.strip() or check.stderr[-500:]} instead")
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "vflpriv", command, str(store), "--out", str(out), *extra],
                          env={**os.environ, "PYTHONPATH": str(path), "MPLBACKEND": "Agg"}, capture_output=True,
                          text=True, cwd=out.parent)  # not a checkout: ``-m`` puts the working directory first
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        sys.exit(f"error: {command} under {path} failed:\n{done.stderr[-2000:]}")
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall


def masked(path: Path) -> bytes:
    data = path.read_bytes()
    if path.name == "report.html":
        data = re.sub(rb"\d{4}-\d\d-\d\d \d\d:\d\d UTC", b"<generated>", data)
        data = re.sub(rb"vflpriv [^,<]*, torch", b"vflpriv <version>, torch", data)
    return data


def differences(base: Path, new: Path) -> list[str]:
    """The files that differ between two output folders, or that only one holds."""
    names = {p.relative_to(base) for p in base.rglob("*") if p.is_file()} | {
        p.relative_to(new) for p in new.rglob("*") if p.is_file()}
    return [str(n) for n in sorted(names)
            if not (base / n).is_file() or not (new / n).is_file() or masked(base / n) != masked(new / n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--base", default="main", help="git revision to compare with (default main)")
    parser.add_argument("--new", help="git revision to measure (default: this checkout's working tree)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", metavar="ATTACK", help="both commands with --attack ATTACK (one secret's records)")
    parser.add_argument("--profile", choices=COMMANDS, help="profile one command of this checkout instead")
    args = parser.parse_args()
    if args.profile:
        return profile(args.profile, args.store)
    with tempfile.TemporaryDirectory(prefix="table-cost-") as tmp:
        tmp = Path(tmp)
        sides = {"base": assemble(export(args.base, tmp / "base"), tmp / "base" / "path"),
                 "new": assemble(export(args.new, tmp / "new") if args.new else ROOT, tmp / "new" / "path")}
        cpu: dict[tuple[str, str], list[float]] = {(s, c): [] for s in sides for c in COMMANDS}
        wall: dict[tuple[str, str], list[float]] = {(s, c): [] for s in sides for c in COMMANDS}
        differ: set[str] = set()
        for repeat in range(args.repeats):
            order = list(sides) if repeat % 2 == 0 else list(reversed(sides))
            for command in COMMANDS:
                outs = {}
                for side in order:
                    outs[side] = tmp / f"{side}-{command}-{repeat}"
                    seconds, elapsed = run(sides[side], command, args.store.resolve(), outs[side],
                                           *(["--attack", args.only] if args.only else []))
                    cpu[side, command].append(seconds)
                    wall[side, command].append(elapsed)
                differ |= {f"{command}: {d}" for d in differences(outs["base"], outs["new"])}
        print(f"# vflpriv table / report on {args.store}: {args.base} against {args.new or 'this checkout'}, "
              f"{args.repeats} repeats interleaved\n")
        print("| command | base CPU s | new CPU s | CPU ratio new/base | base wall s | new wall s |")
        print("|---|---|---|---|---|---|")
        for command in COMMANDS:
            b, n = cpu["base", command], cpu["new", command]
            print(f"| {command} | {_ms(b)} | {_ms(n)} | {sum(n) / sum(b):.2f} | {_ms(wall['base', command])} | "
                  f"{_ms(wall['new', command])} |")
        print("\nfiles that differ: " + (", ".join(sorted(differ)) if differ else "none (every file byte for byte "
                                                                                 "the same)"))
        if differ:
            sys.exit(1)


def profile(command: str, store: Path, top: int = 40) -> None:
    """Print where ``vflpriv COMMAND STORE`` spends its time, by cumulative time (typer's CliRunner, this process)."""
    import cProfile
    import io
    import pstats

    from typer.testing import CliRunner

    from vflpriv.cli import app

    with tempfile.TemporaryDirectory(prefix="table-profile-") as tmp:
        profiler = cProfile.Profile()
        profiler.enable()
        result = CliRunner().invoke(app, [command, str(store), "--out", tmp])
        profiler.disable()
    if result.exit_code:
        sys.exit(f"error: {command} failed: {result.output[-2000:]}")
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(top)
    print(re.sub(r"\S*/(site-packages|wt-[^/]+|main)/", "", text.getvalue()))


def _ms(values: list[float]) -> str:
    mean = sum(values) / len(values)
    std = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
    return f"{mean:.1f} +- {std:.1f}"


if __name__ == "__main__":
    main()
