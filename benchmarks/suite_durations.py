"""Where the README's test command spends its time, and what moved between two runs (issue 49's suite line).

    python benchmarks/suite_durations.py run OUT.xml              # the README's test command, its junit timings
    python benchmarks/suite_durations.py compare OLD.xml NEW.xml  # per file and per test, largest rise first

A run prints its wall time and the load average at its start and end: on a shared machine the load moves the wall
time more than most changes do, so compare two runs made back to back (benchmarks/results/suite_time.md).
"""

from __future__ import annotations

import argparse
import collections
import math
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path


def load(path: Path) -> dict[tuple[str, str], float]:
    """Each test's seconds in a junit file, by (module, test name): a test class's tests under their module."""
    out = {}
    for tc in ET.parse(path).getroot().iter("testcase"):
        module, _, last = (tc.get("classname") or "").rpartition(".")
        module, name = (module, f"{last}::{tc.get('name')}") if last.startswith("Test") else (
            tc.get("classname") or "", tc.get("name") or "")
        seconds = float(tc.get("time") or 0)
        if not (math.isfinite(seconds) and seconds >= 0):  # no test takes nan, inf or -5 seconds
            raise ValueError(f"{module}::{name} took time={tc.get('time')!r}, not a finite number of seconds >= 0")
        out[(module, name)] = seconds
    if not out:
        raise ValueError("it holds no <testcase>")
    return out


def run(out: Path) -> None:
    start, load_start = time.perf_counter(), os.getloadavg()[0]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadfile", "-p",
                           "no:cacheprovider", f"--junitxml={out}"], check=False)
    try:
        summed = f"tests' summed seconds {sum(load(out).values()):.0f}"
    except (OSError, ET.ParseError, ValueError) as exc:  # pytest ran no tests, or wrote no file: its code says why
        summed = f"no timings ({exc})"
    print(f"wall {time.perf_counter() - start:.0f} s, exit {done.returncode}, load average {load_start:.2f} at the "
          f"start, {os.getloadavg()[0]:.2f} at the end; {summed}")
    sys.exit(done.returncode)


def compare(old: Path, new: Path, *, top: int) -> None:
    a, b = load(old), load(new)
    print(f"summed seconds {sum(a.values()):.0f} -> {sum(b.values()):.0f}; tests {len(a)} -> {len(b)}")
    files_a, files_b = collections.Counter(), collections.Counter()
    for (module, _), seconds in a.items():
        files_a[module] += seconds
    for (module, _), seconds in b.items():
        files_b[module] += seconds
    print(f"per file (old, new, change), the {top} largest rises")
    for f in sorted(set(files_a) | set(files_b), key=lambda f: files_a[f] - files_b[f])[:top]:
        print(f"{files_a[f]:8.1f} {files_b[f]:8.1f} {files_b[f] - files_a[f]:+8.1f}  {f}")
    print(f"per test (old, new, change), the {top} largest rises")
    for k in sorted(set(a) | set(b), key=lambda k: a.get(k, 0) - b.get(k, 0))[:top]:
        print(f"{a.get(k, 0):7.2f} {b.get(k, 0):7.2f} {b.get(k, 0) - a.get(k, 0):+7.2f}  {k[0]}::{k[1]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("run").add_argument("out", type=Path)
    both = sub.add_parser("compare")
    both.add_argument("old", type=Path)
    both.add_argument("new", type=Path)
    both.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    if args.command == "run":
        run(args.out)
        return
    for path in (args.old, args.new):
        try:
            load(path)
        except (OSError, ET.ParseError, ValueError) as exc:
            parser.exit(2, f"error: {path} is no junit file ({exc}; make one with: suite_durations.py run {path})\n")
    compare(args.old, args.new, top=args.top)


if __name__ == "__main__":
    main()
