"""Where the CPU time of ``vflpriv audit`` goes: CPU seconds per phase, per attack and per defense (issue 49).

Runs the audit in this one process (``--jobs 1``, one torch thread, a cold cache of its own) with timers wrapped
around the runner's functions, and prints process CPU seconds (``time.process_time``: what the work costs, whatever
else the shared machine runs) by phase -- planning, conformance, training (and inside it pretraining and the CAE
autoencoders), tuning (the search's trials), attacking (the attack itself, or the tuned winner's refit), priors
(the adversary's own encoder, and the prior's head), canaries (their scoring; their cost in trainings is the
``none (no canaries)`` control's), store, report -- and by attack and by defense. Each part is counted exclusively
(a part inside another is taken out of it), so the parts add up to the process's CPU time.

It runs against whichever vflpriv the interpreter imports, so one script profiles two checkouts:

    python benchmarks/audit_profile.py --method splitnn [--seeds 0] [--set audit.quick=true] > new.md
    /tmp/base/.venv/bin/python benchmarks/audit_profile.py --method splitnn > base.md

``--json FILE`` also writes the buckets; ``--compare BEFORE.json AFTER.json`` tables two of them side by side.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import importlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

#: (module, attribute, part); a wrapped function's CPU time goes to ``part`` minus what parts inside it took.
WRAPPED = [
    ("vflpriv.cli.audit", "audit_grid", "planning"),
    ("vflpriv.workflows.conformance", "check_conformance", "conformance"),
    ("vflpriv.runner.execution", "plan", "planning a training"),
    ("vflpriv.runner.execution", "train", "training"),
    ("vflpriv.runner.execution", "_pretrain", "pretraining"),
    ("vflpriv.defenses.cae", "train_autoencoder", "CAE autoencoder"),
    ("vflpriv.runner.execution", "run_attack", "attacking"),
    ("vflpriv.runner.attacking", "tuned", "attacking"),  # the refit of the winner; its trials are tuning
    ("vflpriv.runner.attacking", "prior_predictions", "priors"),
    ("vflpriv.runner.prior", "own_encoder", "prior encoder"),
    ("vflpriv.runner.attacking", "score_canaries", "canaries"),
    ("vflpriv.store.sqlite.Store", "put_many", "store"),
    ("vflpriv.reports.audit", "audit_summary", "report"),
    ("vflpriv.reports.audit", "audit_markdown", "report"),
]


class Clock:
    """Exclusive process CPU seconds per (part, attack, defense), a stack of the parts running."""

    def __init__(self):
        self.buckets: dict[tuple[str, str, str], float] = collections.defaultdict(float)
        self.calls: dict[str, int] = collections.Counter()
        self.stack: list[float] = []  # CPU seconds of the children of each open part
        self.attack, self.defense = "-", "-"

    @contextlib.contextmanager
    def part(self, name: str):
        start = time.process_time()
        self.stack.append(0.0)
        try:
            yield
        finally:
            elapsed = time.process_time() - start
            children = self.stack.pop()
            self.buckets[(name, self.attack, self.defense)] += elapsed - children
            self.calls[name] += 1
            if self.stack:
                self.stack[-1] += elapsed

    def wrap(self, fn, name: str):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            with self.part(name):
                return fn(*args, **kwargs)
        return timed


def _target(dotted: str):
    """A module, or a class inside one (``pkg.mod.Class``)."""
    try:
        return importlib.import_module(dotted)
    except ModuleNotFoundError:
        module, _, cls = dotted.rpartition(".")
        return getattr(importlib.import_module(module), cls)


def instrument(clock: Clock) -> None:
    """Wrap the runner's functions; and set the clock's defense (per training) and attack (per attack run)."""
    from vflpriv.runner import execution

    for where, attr, part in WRAPPED:
        owner = _target(where)
        if hasattr(owner, attr):
            setattr(owner, attr, clock.wrap(getattr(owner, attr), part))
    trial_owner = importlib.import_module("vflpriv.attacks.search").Search
    trial_owner.trial = clock.wrap(trial_owner.trial, "tuning")

    run_attack, inner = execution.run_attack, execution._execute

    def attacked(a, *args, **kwargs):
        clock.attack = a.config.attack.name
        try:
            return run_attack(a, *args, **kwargs)
        finally:
            clock.attack = "-"

    def executed(p):
        swept = p.config.swept
        if swept is not None:
            clock.defense = swept.name
        else:
            clock.defense = "none" if p.config.partition.canaries else "none (no canaries)"
        if p.acting is not None:
            clock.defense += " [mc-active's own training]"
        try:
            return inner(p)
        finally:
            clock.defense = "-"

    execution.run_attack, execution._execute = attacked, executed


def table(rows: dict[str, float], total: float, title: str) -> list[str]:
    lines = [f"| {title} | CPU s | share |", "| --- | --- | --- |"]
    for name, seconds in sorted(rows.items(), key=lambda kv: -kv[1]):
        lines.append(f"| {name} | {seconds:.1f} | {seconds / total:.1%} |")
    return lines


def report(clock: Clock, total: float, wall: float, argv: list[str]) -> str:
    import torch

    import vflpriv

    by_part: dict[str, float] = collections.defaultdict(float)
    by_attack: dict[str, float] = collections.defaultdict(float)
    by_defense: dict[str, float] = collections.defaultdict(float)
    by_attack_part: dict[str, float] = collections.defaultdict(float)
    for (part, attack, defense), seconds in clock.buckets.items():
        by_part[part] += seconds
        if attack != "-":
            by_attack[attack] += seconds
            by_attack_part[f"{attack}: {part}"] += seconds
        elif defense != "-":
            by_defense[defense] += seconds
    by_part["other (start-up, imports, the CLI, sweeping)"] = total - sum(clock.buckets.values())
    lines = [f"vflpriv {getattr(vflpriv, '__version__', '?')} at {os.environ.get('PROFILE_COMMIT', '?')}, torch "
             f"{torch.__version__}; `{' '.join(argv)}`",
             f"process CPU {total:.1f} s, wall {wall:.1f} s (one process, one torch thread)", ""]
    lines += table(by_part, total, "phase") + [""]
    lines += table(by_attack, total, "attack (its tuning, attacking, priors and canaries)") + [""]
    lines += table(by_attack_part, total, "attack: phase") + [""]
    lines += table(by_defense, total, "trainings under (defense)") + [""]
    lines.append("calls: " + ", ".join(f"{k} {v}" for k, v in sorted(clock.calls.items())))
    return "\n".join(lines)


def sums(buckets: list[list]) -> dict[str, dict[str, float]]:
    """Per phase, per attack and per defense: CPU seconds (exclusive parts, as ``report`` tables them)."""
    out: dict[str, dict[str, float]] = {"phase": collections.defaultdict(float), "attack": collections.defaultdict(float),
                                        "defense": collections.defaultdict(float)}
    for part, attack, defense, seconds in buckets:
        out["phase"][part] += seconds
        if attack != "-":
            out["attack"][attack] += seconds
        elif defense != "-":
            out["defense"][defense] += seconds
    return out


def compare(before: Path, after: Path) -> str:
    """Two profiles' JSON (``--json``) side by side: CPU seconds before, after, and the change."""
    a, b = (json.loads(p.read_text()) for p in (before, after))
    sa, sb = sums(a["buckets"]), sums(b["buckets"])
    for s, total in ((sa, a["total"]), (sb, b["total"])):
        s["phase"]["other (start-up, imports, the CLI, sweeping)"] = total - sum(s["phase"].values())
    lines = [f"process CPU: {a['total']:.1f} s before, {b['total']:.1f} s after ({b['total'] / a['total']:.2f}x)", ""]
    for what in ("phase", "attack", "defense"):
        title = {"phase": "phase", "attack": "attack (tuning, attacking, priors, canaries)",
                 "defense": "trainings under (defense)"}[what]
        lines += [f"| {title} | before, CPU s | after, CPU s | after - before |", "| --- | --- | --- | --- |"]
        for name in sorted(set(sa[what]) | set(sb[what]), key=lambda n: -sa[what].get(n, 0.0)):
            x, y = sa[what].get(name, 0.0), sb[what].get(name, 0.0)
            lines.append(f"| {name} | {x:.1f} | {y:.1f} | {y - x:+.1f} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--compare":
        print(compare(Path(sys.argv[2]), Path(sys.argv[3])))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", default="splitnn")
    parser.add_argument("--seeds", default=None, help="e.g. 0 (default: the audit's)")
    parser.add_argument("--set", action="append", default=[], dest="sets", help="--set for the audit (repeatable)")
    parser.add_argument("--extra", default="", help="more audit arguments, space-separated (e.g. --quick)")
    parser.add_argument("--json", type=Path, default=None, help="also write the buckets as JSON")
    args = parser.parse_args()
    os.environ["VFLPRIV_CACHE"] = tempfile.mkdtemp(prefix="vflpriv-profile-cache-")
    out = Path(tempfile.mkdtemp(prefix="vflpriv-profile-out-")) / "audit"
    argv = ["audit", "--method", args.method, "--jobs", "1", "--out", str(out), "--quiet",
            *(["--seeds", args.seeds] if args.seeds else []), *(a for s in args.sets for a in ("--set", s)),
            *args.extra.split()]
    cpu0, wall0 = time.process_time(), time.perf_counter()
    import torch

    torch.set_num_threads(1)
    clock = Clock()
    instrument(clock)
    from vflpriv.cli import app

    code = app(argv, standalone_mode=False)
    total, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    print(report(clock, total, wall, ["vflpriv", *argv]))
    if args.json:
        args.json.write_text(json.dumps({"total": total, "wall": wall, "argv": argv, "buckets": [
            [p, a, d, s] for (p, a, d), s in sorted(clock.buckets.items())]}, indent=1))
    if code not in (None, 0):
        sys.exit(code)


if __name__ == "__main__":
    main()
