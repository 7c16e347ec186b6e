"""What each start-up cut of issue 49 buys: the CPU seconds of one part of a cold command in a fresh process, two
checkouts interleaved (CPU seconds of the child: steadier than wall time on a shared machine).

    python benchmarks/startup_parts.py --base-python /tmp/m49e/.venv/bin/python [--repeats 5] [--parts cli,header]

Parts (each a fresh interpreter, with an empty cache of its own):

- ``cli``: ``import vflpriv.cli``, what every command imports before it runs (and before it spawns its workers);
- ``digits``: loading digits cold (``load_dataset``, the cache empty), with torch imported first (the command has it);
- ``worker``: what a loky worker imports and does before its first training: its warm-up imports and the planning of
  one training of the main command (dataset from the cache);
- ``report``: the modules the main command's report imports (``vflpriv.reports.plots``, ``vflpriv.reports.tables``)
  with torch imported first;
- ``audit-plan``: planning the default ``vflpriv audit --method splitnn`` (``audit_grid``: every run, its canaries
  sized for the DP claims, the dataset loaded cold), with the command line imported and the audit's settings built
  first;
- ``header``: the main command's header lines (what is measured, the partition), printed after planning and before
  the first training, with the command's experiment built first.

Each figure is the median over ``--repeats`` of the child's CPU seconds minus those of a child that only imports
what the part starts from (torch, or nothing), so it is the part's own cost.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

#: part -> (what it starts from, the part itself); both run in one child, the first alone in the baseline child.
PARTS = {
    "cli": ("", "import vflpriv.cli"),
    "digits": ("import torch; from vflpriv.config.schema import DatasetConfig; from vflpriv.data.load import "
               "load_dataset", "load_dataset(DatasetConfig(name='digits'), parties=2)"),
    "worker": ("import torch; from vflpriv.config.schema import DatasetConfig; from vflpriv.data.load import "
               "load_dataset; load_dataset(DatasetConfig(name='digits'), parties=2)",
               "import vflpriv.tradeoff.executors, vflpriv.runner.execution\n"
               "from vflpriv.config.sweep import ExperimentConfig\n"
               "from vflpriv.runner.planning import plan\n"
               "e = ExperimentConfig.model_validate({'method': {'name': 'fedhssl'}, 'attack': {'name': 'mc'}, "
               "'defenses': [{'name': 'iso', 'phase': 'finetune', 'sweep': True}], 'strengths': [1], 'seeds': [0]})\n"
               "plan(e.runs())"),
    "report": ("import torch", "import vflpriv.reports.plots, vflpriv.reports.tables"),
    "audit-plan": ("import torch, vflpriv.cli\nfrom vflpriv.cli.audit import build_audit\n"
                   "from vflpriv.workflows.audit import audit_grid\n"
                   "cfg = build_audit(config=None, method='splitnn', dataset=None, attacks=None, defenses=None, "
                   "phases=None, seeds=None, jobs=None, backend=None, device=None, all_adversaries=False, overrides=[])",
                   "audit_grid(cfg)"),
    "header": ("import torch\nfrom vflpriv.cli.evaluate import build_experiment\n"
               "from vflpriv.workflows.headers import experiment_line, partition_line\n"
               "e = build_experiment(config=None, method='fedhssl', attack='mc', defense='iso', dataset=None, "
               "strengths=None, seeds=None, phase=None, jobs=None, backend=None, device=None, overrides=[])",
               "experiment_line(e), partition_line(e)"),
}


def cpu_of(python: str, code: str, cache: Path) -> float:
    """CPU seconds (user + system) of a child running ``code`` in the cache's folder (not in a checkout, whose
    ``vflpriv`` a ``-c`` child would import before its venv's)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([python, "-c", code], check=True, env={**os.environ, "VFLPRIV_CACHE": str(cache)},
                   stdout=subprocess.DEVNULL, cwd=cache.parent)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-python", required=True, help="the other checkout's Python (its venv)")
    parser.add_argument("--new-python", default=sys.executable)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    args = parser.parse_args()
    pythons = {"base": args.base_python, "new": args.new_python}
    tmp = Path(tempfile.mkdtemp(prefix="startup-parts-"))
    print(f"base {args.base_python}, new {args.new_python}; load average {os.getloadavg()[0]:.1f}")
    for part in args.parts.split(","):
        start, body = PARTS[part]
        own: dict[str, list[float]] = {"base": [], "new": []}
        for r in range(args.repeats):
            for name in (("base", "new") if r % 2 == 0 else ("new", "base")):
                cache = Path(tempfile.mkdtemp(dir=tmp))
                if part == "worker":  # the dataset in the cache, as the parent left it: both children read it
                    cpu_of(pythons[name], start, cache)
                whole = cpu_of(pythons[name], f"{start}\n{body}", cache)
                alone = cpu_of(pythons[name], start or "pass", cache if part == "worker" else
                               Path(tempfile.mkdtemp(dir=tmp)))
                own[name].append(whole - alone)
        b, n = statistics.median(own["base"]), statistics.median(own["new"])
        print(f"{part}: base {b:.2f} CPU s, new {n:.2f} CPU s, saved {b - n:+.2f} "
              f"(per repeat base {', '.join(f'{x:.2f}' for x in own['base'])}; new "
              f"{', '.join(f'{x:.2f}' for x in own['new'])})", flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
