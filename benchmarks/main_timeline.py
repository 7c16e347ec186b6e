"""A timeline of one cold ``vflpriv`` command across its processes (issue 49): when the parent and each worker
start, finish their imports (torch, scikit-learn, pandas, matplotlib), load the dataset, plan, run each training,
draw the report, and exit.

    python benchmarks/main_timeline.py [--repeats 2] [-- evaluate --method fedhssl --attack mc --defense iso]

Nothing in vflpriv is instrumented: a ``sitecustomize.py`` written to a temporary folder on ``PYTHONPATH`` (so the
loky workers load it too) wraps a few functions as their modules are imported and appends ``pid ppid event
seconds`` lines to a log; the clock is the wall clock, shared by the processes. Each repeat runs with an empty cache
of its own (cold). The wrappers cost microseconds per call; the import hook adds one lookup per import.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from harness import MAIN_COMMAND  # noqa: E402 - the README's main command, measured as the harness does

SITECUSTOMIZE = r'''
import importlib.abc, os, sys, time

LOG = os.environ.get("VFLPRIV_TIMELINE")


def note(event, at=None):
    with open(LOG, "a") as f:
        f.write(f"{os.getpid()} {os.getppid()} {event.replace(' ', '_')} {time.time() if at is None else at:.4f}\n")


#: module -> attributes to time (each call logged as "module.attr+" at its start and "module.attr-" at its end).
TIMED = {
    "vflpriv.data.load": ["_load"],
    "vflpriv.runner.execution": ["execute"],
    "vflpriv.workflows.experiment": ["run_into_store", "evaluate_experiment", "run_grid"],
    "vflpriv.reports.plots": ["tradeoff_figures"],
    "vflpriv.tradeoff.sweep": ["check", "sweep"],
    "vflpriv.tradeoff.executors": ["_warm_up", "prewarm"],
}
#: modules whose import is logged ("import module" when it finishes).
IMPORTS = {"torch", "sklearn", "scipy", "pandas", "matplotlib.pyplot", "vflpriv.cli", "vflpriv.runner.execution",
           "joblib", "typer", "rich"}


def timed(name, fn):
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        note(name + "+")
        try:
            return fn(*args, **kwargs)
        finally:
            note(name + "-")

    return wrapper


class Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in TIMED and name not in IMPORTS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader, begun = spec.loader, time.time()
        original = loader.exec_module

        def exec_module(module):
            original(module)
            if name in IMPORTS:
                note(f"import {name} ({time.time() - begun:.2f} s)")
            for attr in TIMED.get(name, ()):
                fn = getattr(module, attr, None)
                if fn is not None:
                    wrapped = timed(f"{name}.{attr}", getattr(fn, "__wrapped__", fn))
                    if hasattr(fn, "cache_info"):  # an lru_cache: time the calls that miss it
                        import functools

                        wrapped = functools.lru_cache(maxsize=fn.cache_info().maxsize)(wrapped)
                    setattr(module, attr, wrapped)

        loader.exec_module = exec_module
        return spec


if LOG:
    note("python ready")
    sys.meta_path.insert(0, Hook())
    _exit = os._exit

    def _logged_exit(code):
        note("exit")
        _exit(code)

    os._exit = _logged_exit
'''


def run(command: list[str], folder: Path, tag: str) -> tuple[float, float, list[tuple[int, int, str, float]]]:
    """(wall seconds, CPU seconds of the process tree, events) of one cold ``vflpriv COMMAND``; the parent's first
    event, "launched", is when this script started it."""
    log = folder / f"{tag}.log"
    env = {**os.environ, "VFLPRIV_TIMELINE": str(log), "VFLPRIV_CACHE": str(folder / f"cache-{tag}"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(folder / "site"), os.environ.get("PYTHONPATH")]))}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    log.write_text(f"0 0 launched {start:.4f}\n")
    subprocess.run([sys.executable, "-m", "vflpriv", *command, "--out", str(folder / f"out-{tag}")], env=env,
                   cwd=folder, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.time() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    events = []
    lines = [line.split(" ") for line in log.read_text().splitlines()]
    parent = next(int(pid) for pid, ppid, _, _ in lines[1:] if int(ppid) == os.getpid())
    for pid, ppid, event, at in lines:
        events.append((int(pid) or parent, int(ppid), event.replace("_", " "), float(at)))
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu, events


def show(events: list[tuple[int, int, str, float]], say) -> None:
    """One block per process, its events in seconds since the parent was launched."""
    by_pid: dict[int, list[tuple[str, float]]] = defaultdict(list)
    for pid, _, event, at in events:
        by_pid[pid].append((event, at))
    origin = next(at for _, _, event, at in events if event == "launched")
    parent = next(pid for pid, _, event, _ in events if event == "launched")
    for pid, items in sorted(by_pid.items(), key=lambda kv: kv[1][0][1]):
        role = "parent" if pid == parent else "worker"
        say(f"  {role} {pid}: " + "; ".join(f"{event} {at - origin:.2f}" for event, at in sorted(items, key=lambda x: x[1])
                                             if not event.startswith("vflpriv.tradeoff.executors.prewarm")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("command", nargs="*", default=MAIN_COMMAND, help="vflpriv's arguments (after --)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="timeline-"))
    (folder / "site").mkdir()
    (folder / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    print(f"vflpriv {' '.join(args.command)}, cold; load average {os.getloadavg()[0]:.1f} (events: seconds since the "
          "parent was launched; +/-: a call's start and end)")
    for r in range(args.repeats):
        wall, cpu, events = run(args.command, folder, f"r{r}")
        print(f"repeat {r + 1}: {wall:.2f} s wall, {cpu:.2f} CPU s")
        show(events, print)


if __name__ == "__main__":
    main()
