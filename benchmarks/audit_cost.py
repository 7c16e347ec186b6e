"""The audit's cost against 0c34d33's, side by side in one run (issue 49): every figure a ratio of timings taken here.

1. The default audits, ``vflpriv audit --method splitnn`` and ``--method fedhssl`` (``--methods``), cold (empty
   cache, new output folder), the old and the new code alternating; their outputs are kept and compared
   (``compare_audits.py``, its output written beside them), and the new audit's progress lines are checked against
   the time it really took (the ETA's error after the first 5% of the runs).
2. The README's main command (``vflpriv evaluate --method fedhssl --attack mc --defense iso``) cold, alternating.
3. Two workers against one: a 3 methods x 3 strengths x 3 seeds grid on digits (``vflpriv sweep``, the harness's),
   cold, ``--jobs 1`` and ``--jobs 2`` alternating, for both checkouts.
4. The quick profile (``vflpriv audit --method splitnn --quick``), this code only, cold.
   With ``replay``: the progress estimate of this code replayed on the kept audits' recorded timings
   (``eta_replay.py``), beside the factors the new audit's own progress lines reached.
5. VFLAIR's breast-cancer MixMatch experiment against vflpriv's (``vflair_vs_vflpriv.py`` measures it; here only
   if ``--vflair`` names its command).

The old code runs from a checkout of 0c34d33 with a venv of its own (never committed):

    git worktree add /tmp/base 0c34d33
    (cd /tmp/base && python3 -m venv .venv && .venv/bin/pip install -q -c constraints.txt -e '.[search]')
    python benchmarks/audit_cost.py --base /tmp/base [--only audits,main,quick,grid,replay] [--methods splitnn,fedhssl] \
        [--repeats 1] [--keep DIR] [--new-python PYTHON] [--record benchmarks/results/audit_cost.md] [--together] \
        [--main DIR --main-name NAME] [--main-repeats 3]

``--main DIR`` measures a third checkout (main, with its own venv in DIR/.venv) beside the two in the main command
and the grid, in the same rotation.

``--together`` runs each method's two audits at the same time instead of one after the other: on a machine that
others load unevenly, both then meet the same load (their wall ratio follows their CPU ratio; neither is alone).

CPU seconds (the command's and its workers') are printed beside each wall time: on a shared machine they are the
steadier figure, and half of them is what the command needs at least on 2 quiet cores.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from eta_replay import FLOOR  # noqa: E402 - the ETA's factors are counted alike live and replayed
from harness import GRID, MAIN_COMMAND  # noqa: E402 - the harness's grid and main command, measured the same way

from vflpriv.store.folders import default_store  # noqa: E402 - after the benchmarks' own path

PROGRESS = re.compile(r"runs (\d+)/(\d+) \((\d+)%\), (?:(\d+):)?(\d+):(\d+) elapsed, about (?:(\d+):)?(\d+):(\d+) left")
LINE = re.compile(r"runs (\d+)/(\d+) \((\d+)%\), (?:(\d+):)?(\d+):(\d+) elapsed")


def seconds(h: str | None, m: str, s: str) -> int:
    return int(h or 0) * 3600 + int(m) * 60 + int(s)


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


class Runner:
    """Runs one checkout's ``vflpriv`` cold and times it."""

    def __init__(self, name: str, python: Path, tmp: Path, label: str | None = None):
        self.name, self.python, self.tmp, self.label = name, python, tmp, label or name

    def start(self, args: list[str], *, tag: str, log: Path) -> tuple[subprocess.Popen, float]:
        """``vflpriv ARGS`` started with an empty cache of its own, its output to ``log``: (process, start time)."""
        cache = Path(tempfile.mkdtemp(prefix=f"cache-{self.name}-{tag}-", dir=self.tmp))
        env = {**os.environ, "VFLPRIV_CACHE": str(cache)}
        with log.open("w") as out:
            process = subprocess.Popen([str(self.python), "-m", "vflpriv", *args], env=env, cwd=self.tmp,
                                       stdout=subprocess.DEVNULL, stderr=out)
        return process, time.perf_counter()

    def run(self, args: list[str], *, tag: str, cwd: Path | None = None) -> tuple[float, float, str]:
        """(wall seconds, CPU seconds of the command and its workers, stderr) of ``vflpriv ARGS`` with an empty cache
        of its own. On a shared machine the CPU seconds are the steadier figure."""
        cache = Path(tempfile.mkdtemp(prefix=f"cache-{self.name}-{tag}-", dir=self.tmp))
        env = {**os.environ, "VFLPRIV_CACHE": str(cache)}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run([str(self.python), "-m", "vflpriv", *args], env=env, cwd=cwd or self.tmp,
                              capture_output=True, text=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"{self.name}: vflpriv {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
        return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, done.stderr


def eta_check(stderr: str) -> str:
    """Each progress line after the first 5% of the runs with at least ``eta_replay.FLOOR`` seconds really left: its
    estimate of the time left against the time the audit really took from there to its last line; and the worst
    factor between the two (the replay of ``eta_replay.py`` counts the same lines). An audit prints a second progress
    block when the active adversary escalates (its clock restarts at 0:00): each block's clock is offset by the blocks
    before it, so the truth is the whole audit's end, not the first block's."""
    offset, last, stamped = 0, 0, []
    for m in LINE.finditer(stderr):
        elapsed = seconds(m[4], m[5], m[6])
        if elapsed < last:
            offset += last
        last = elapsed
        stamped.append((m, offset + elapsed))
    if not any(m[1] == m[2] for m, _ in stamped):
        return "no progress lines"
    end, parts, worst = stamped[-1][1], [], 1.0
    for m, at in stamped:
        estimate = PROGRESS.match(stderr, m.start())
        if estimate is None:
            continue
        done, n, left = int(m[1]), int(m[2]), seconds(estimate[7], estimate[8], estimate[9])
        real = end - at
        if done >= 0.05 * n and real >= FLOOR and left > 0:
            worst = max(worst, left / real, real / left)
            parts.append(f"{m[3]}%: {left} s vs {real} s")
    return f"{'; '.join(parts) or 'no line after 5%'}; worst factor {worst:.2f} (goal: at most 1.5)"


def audits(old: Runner, new: Runner, repeats: int, keep: Path, say, methods: list[str]) -> None:
    for method in methods:
        walls: dict[str, list[float]] = {"base": [], "new": []}
        cpus: dict[str, list[float]] = {"base": [], "new": []}
        for r in range(repeats):
            for runner in ((old, new) if r % 2 == 0 else (new, old)):
                out = keep / f"{method}-{runner.name}-{r}"
                say(f"{method}, {runner.name}, repeat {r + 1}: starting ({load()})")
                wall, cpu, err = runner.run(["audit", "--method", method, "--out", str(out)], tag=f"{method}{r}")
                walls[runner.name].append(wall)
                cpus[runner.name].append(cpu)
                (keep / f"{method}-{runner.name}-{r}.stderr").write_text(err)
                say(f"{method}, {runner.name}, repeat {r + 1}: {wall:.1f} s wall, {cpu:.1f} CPU s ({load()})")
                say(f"  its ETA, estimated against real time left: {eta_check(err)}")
        b, n = statistics.median(walls["base"]), statistics.median(walls["new"])
        cb, cn = statistics.median(cpus["base"]), statistics.median(cpus["new"])
        say(f"**{method}: default audit cold, 0c34d33 {b:.1f} s wall ({cb:.0f} CPU s), this code {n:.1f} s wall "
            f"({cn:.0f} CPU s): ratio {n / b:.2f} in wall time, {cn / cb:.2f} in CPU seconds (goal: at most 0.5)**")
        compare(new, keep, method, say)


def audits_together(old: Runner, new: Runner, keep: Path, say, methods: list[str]) -> None:
    """Each method's two audits at the same time (``--together``): on a machine others load unevenly, both meet the
    same load, so their wall times compare; each one's CPU seconds are its own (``wait4``: it and its workers)."""
    for method in methods:
        say(f"{method}, base and new together: starting ({load()})")
        started = {r.name: r.start(["audit", "--method", method, "--out", str(keep / f"{method}-{r.name}-0")],
                                   tag=f"{method}0", log=keep / f"{method}-{r.name}-0.stderr") for r in (old, new)}
        result: dict[str, tuple[float, float]] = {}

        def wait(name: str) -> None:
            process, start = started[name]
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
            result[name] = (time.perf_counter() - start, usage.ru_utime + usage.ru_stime)

        threads = [threading.Thread(target=wait, args=(name,)) for name in started]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for name in ("base", "new"):
            if started[name][0].returncode != 0:
                raise SystemExit(f"{name}: the {method} audit failed; see {keep / f'{method}-{name}-0.stderr'}")
            wall, cpu = result[name]
            say(f"{method}, {name}: {wall:.1f} s wall, {cpu:.1f} CPU s ({load()})")
        say(f"  the new audit's ETA, estimated against real time left: "
            f"{eta_check((keep / f'{method}-new-0.stderr').read_text())}")
        (b, cb), (n, cn) = result["base"], result["new"]
        say(f"**{method}: default audit cold, both at once, 0c34d33 {b:.1f} s wall ({cb:.0f} CPU s), this code "
            f"{n:.1f} s wall ({cn:.0f} CPU s): ratio {n / b:.2f} in wall time, {cn / cb:.2f} in CPU seconds (goal: at "
            f"most 0.5)**")
        compare(new, keep, method, say)


def compare(new: Runner, keep: Path, method: str, say) -> None:
    """compare_audits.py on the first pair of audits, its record beside them."""
    record = keep / f"compare-{method}.md"
    subprocess.run([str(new.python), str(HERE / "compare_audits.py"), str(keep / f"{method}-base-0"),
                    str(keep / f"{method}-new-0"), "--record", str(record)], check=True, capture_output=True)
    say(f"  compared: python benchmarks/compare_audits.py {keep}/{method}-base-0 {keep}/{method}-new-0 "
        f"(written to {record}): " + next((line for line in record.read_text().splitlines()
                                           if line.startswith("summary:")), ""))


def quick(new: Runner, keep: Path, say) -> None:
    wall, cpu, err = new.run(["audit", "--method", "splitnn", "--quick", "--out", str(keep / "quick")], tag="quick")
    say(f"quick profile (splitnn): {wall:.1f} s wall, {cpu:.1f} CPU s (at least {cpu / 2:.1f} s on 2 quiet cores; "
        f"goal: under a minute) ({load()})")


def main_command(runners: list[Runner], repeats: int, say) -> None:
    """The README's main command cold, ``repeats`` times each, the checkouts in turn (their order reversed every other
    repeat); the last runner (this code) against each of the others."""
    walls: dict[str, list[float]] = {r.name: [] for r in runners}
    cpus: dict[str, list[float]] = {r.name: [] for r in runners}
    for r in range(repeats):
        for runner in (runners if r % 2 == 0 else runners[::-1]):
            out = runner.tmp / f"main-{runner.name}-{r}"
            wall, cpu, _ = runner.run([*MAIN_COMMAND, "--out", str(out)], tag=f"main{r}")
            walls[runner.name].append(wall)
            cpus[runner.name].append(cpu)
    new = runners[-1].name
    n, cn = statistics.median(walls[new]), statistics.median(cpus[new])
    for runner in runners[:-1]:
        b, cb = statistics.median(walls[runner.name]), statistics.median(cpus[runner.name])
        say(f"README main command cold: {runner.label} {b:.1f} s (runs "
            f"{', '.join(f'{w:.1f}' for w in walls[runner.name])}; {cb:.1f} CPU s), this code {n:.1f} s (runs "
            f"{', '.join(f'{w:.1f}' for w in walls[new])}; {cn:.1f} CPU s): **ratio {n / b:.2f}** in wall time, "
            f"{cn / cb:.2f} in CPU seconds (goal against 0c34d33: 0.5)")
    reference = runners[-1].tmp / f"main-{new}-0"
    for runner in runners:
        for r in range(repeats):
            say(f"{runner.label}, repeat {r}, against this code's first: "
                + same_outputs(runner.tmp / f"main-{runner.name}-{r}", reference))


#: What a results.csv may differ in between two runs of the same command: how long each part took.
TIMINGS = ("train_seconds", "attack_seconds")


def same_outputs(folder: Path, reference: Path) -> str:
    """Whether ``folder`` holds the numbers of ``reference``: every column of results.csv the two share but the
    timings, cap.csv and tradeoff.png byte for byte; the columns only one side has are named (a newer record)."""
    import pandas as pd

    def rows(path: Path) -> pd.DataFrame:
        frame = pd.read_csv(path / "results.csv")
        return frame.drop(columns=[c for c in TIMINGS if c in frame]).sort_values(["seed", "strength"], ignore_index=True)

    a, b = rows(folder), rows(reference)
    shared = [c for c in a.columns if c in b.columns]
    differ = [c for c in shared if not a[c].equals(b[c])] if len(a) == len(b) else ["(row count)"]
    files = {name: (folder / name).read_bytes() == (reference / name).read_bytes() for name in ("cap.csv", "tradeoff.png")}
    return (f"results.csv {len(shared)} shared columns, differing: {', '.join(differ) or 'none'}"
            f" ({len(set(a.columns) ^ set(b.columns))} columns on one side only); "
            + "; ".join(f"{name} {'same bytes' if same else 'DIFFERENT'}" for name, same in files.items()))


def grid(runners: list[Runner], repeats: int, say) -> None:
    """Each checkout's grid at ``--jobs 1`` and ``--jobs 2``, cold: within a repeat every checkout in turn, each with
    both job counts (orders reversed every other repeat), so a change of the machine's load meets all of them."""
    spec = runners[-1].tmp / "grid.yaml"
    spec.write_text(GRID)
    walls = {(r.name, jobs): [] for r in runners for jobs in (1, 2)}
    cpus = {(r.name, jobs): [] for r in runners for jobs in (1, 2)}
    for rep in range(repeats):
        for runner in (runners if rep % 2 == 0 else runners[::-1]):
            for jobs in ((1, 2) if rep % 2 == 0 else (2, 1)):
                out = runner.tmp / f"grid-{runner.name}-{jobs}-{rep}"
                wall, cpu, _ = runner.run(["sweep", str(spec), "--out", str(out), "--jobs", str(jobs)],
                                          tag=f"grid{jobs}{rep}")
                walls[runner.name, jobs].append(wall)
                cpus[runner.name, jobs].append(cpu)
    for runner in runners:
        one, two = statistics.median(walls[runner.name, 1]), statistics.median(walls[runner.name, 2])
        c1, c2 = statistics.median(cpus[runner.name, 1]), statistics.median(cpus[runner.name, 2])
        say(f"{runner.label}: grid --jobs 1 {one:.1f} s ({c1:.1f} CPU s), --jobs 2 {two:.1f} s ({c2:.1f} CPU s: the "
            f"second worker's start-up and repeated work {c2 - c1:+.1f}): **speedup {one / two:.2f}x** (per repeat "
            f"{', '.join(f'{a / b:.2f}' for a, b in zip(walls[runner.name, 1], walls[runner.name, 2]))}; goal for "
            "this code: 1.8x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="checkout of 0c34d33 with its venv in .venv")
    parser.add_argument("--only", default="audits,main,quick,grid,replay",
                        help="comma-separated: audits, main, quick, grid, replay (the ETA on the kept audits' timings)")
    parser.add_argument("--methods", default="splitnn,fedhssl", help="the audits' methods, comma-separated")
    parser.add_argument("--new-python", type=Path, default=Path(sys.executable),
                        help="the Python of the code measured against 0c34d33 (default: this one)")
    parser.add_argument("--repeats", type=int, default=1, help="of each audit (main command and grid: 3)")
    parser.add_argument("--main-repeats", type=int, default=3, help="of the main command (on a loaded machine: more)")
    parser.add_argument("--keep", type=Path, default=None, help="where the audits' outputs go (default: a temp dir)")
    parser.add_argument("--record", type=Path, default=None, help="also write the output to this Markdown file")
    parser.add_argument("--main", type=Path, default=None,
                        help="a third checkout with its venv in .venv (main, say), measured beside the two in the main "
                        "command and the grid")
    parser.add_argument("--main-name", default="main", help="how the output names --main's checkout")
    parser.add_argument("--together", action="store_true",
                        help="run each method's two audits at the same time (one repeat), not one after the other")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="audit-cost-"))
    keep = args.keep or tmp / "audits"
    keep.mkdir(parents=True, exist_ok=True)
    old = Runner("base", args.base / ".venv" / "bin" / "python", tmp, label="0c34d33")
    new = Runner("new", args.new_python, tmp, label="this code")
    others = [old] + ([Runner("main", args.main / ".venv" / "bin" / "python", tmp, label=args.main_name)]
                      if args.main else [])
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    head = subprocess.run(["git", "-C", str(HERE.parent), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    say(f"# The audit's cost: this code ({head}) against 0c34d33, side by side")
    say(f"command: python benchmarks/audit_cost.py --base {args.base} --only {args.only} --methods {args.methods} "
        f"--repeats {args.repeats}{' --together' if args.together else ''} --new-python {args.new_python}"
        + (f" --main-repeats {args.main_repeats}" if args.main_repeats != 3 else "")
        + (f" --main {args.main} --main-name {args.main_name}" if args.main else ""))
    say(f"machine: {os.cpu_count()} CPUs; at the start {load()}")
    only = set(args.only.split(","))
    if "audits" in only and args.together:
        audits_together(old, new, keep, say, args.methods.split(","))
    elif "audits" in only:
        audits(old, new, args.repeats, keep, say, args.methods.split(","))
    if "main" in only:
        main_command([*others, new], args.main_repeats, say)
    if "quick" in only:
        quick(new, keep, say)
    if "grid" in only:
        grid([*others, new], 3, say)
    if "replay" in only:  # the estimate replayed on the audits' recorded timings (``eta_replay.py``)
        for method in args.methods.split(","):
            for name in ("new", "base"):
                folder = keep / f"{method}-{name}-0"
                if default_store(folder).is_file():
                    done = subprocess.run([str(new.python), str(HERE / "eta_replay.py"), str(folder)],
                                          capture_output=True, text=True)
                    for line in (done.stdout + done.stderr).splitlines():
                        say(f"ETA replayed: {line}")
    say(f"at the end {load()}")
    if args.record:
        args.record.write_text("\n\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
