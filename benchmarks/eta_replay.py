"""Replay an audit's recorded timings through the progress estimate (issue 49): what it would have printed at each
finished training, against the time the audit really had left from there.

    python benchmarks/eta_replay.py AUDIT_DIR [AUDIT_DIR ...] [--jobs 2]

An audit's store (``AUDIT_DIR/results.sqlite``) holds, per run, its training's seconds, its attack's seconds and when
its record was written. Two timelines are replayed, each through :class:`vflpriv.common.progress.RunProgress` with a
clock of its own:

- *recorded*: the trainings start and finish when they did (a start is its record's time less the training's and
  its attacks' seconds); the estimate meets the machine's load as it changed during the audit;
- *steady*: the same trainings in the order this code schedules them (``vflpriv.tradeoff.sweep.schedule``), on
  ``--jobs`` workers that each take the next one when free, each training and each attack costing its kind's median
  over the audit: the relative costs of the audit's work without the drift of the machine's load (on a shared
  machine the trainings' seconds tripled and fell back during one audit, which no estimate made at 5% can foresee),
  so this isolates what the estimate gets wrong about the work.

For each, the worst factor between the estimate and the truth after the first 5% of the runs, while at least
:data:`FLOOR` seconds are left (goal: at most 1.5).
"""

from __future__ import annotations

import argparse
import heapq
import json
import sqlite3
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console

from vflpriv.common.progress import Planned, RunProgress
from vflpriv.store.folders import STORE_NAME, default_store
from vflpriv.tradeoff.sweep import planned_work, schedule


#: Seconds really left below which a factor is not counted: the last progress lines of a piped audit are 30 s apart,
#: and "0:03 left" against 6 s is a factor of 2 no user acts on.
FLOOR = 30.0


@dataclass
class Training:
    """One recorded training: its records, their seconds, and when its last record was written."""

    key: str
    records: list[SimpleNamespace]
    seconds: float  # its training and its attacks
    written: float


def recorded(folder: Path) -> list[Training]:
    """The trainings of an audit's store, in the order they started (their record's time less their seconds)."""
    db = sqlite3.connect(f"file:{default_store(folder)}?mode=ro", uri=True)
    groups: dict[str, list[tuple[dict, float]]] = {}
    for training_key, text, updated in db.execute("SELECT training_key, record, updated FROM runs"):
        groups.setdefault(training_key, []).append((json.loads(text), updated))
    trainings = []
    for key, rows in groups.items():
        records = [SimpleNamespace(**{k: r[k] for k in ("key", "training_key", "attack", "config")},
                                   train_seconds=float(r["train_seconds"] or 0.0),
                                   attack_seconds=float(r["attack_seconds"] or 0.0)) for r, _ in rows]
        seconds = records[0].train_seconds + sum(r.attack_seconds for r in records)
        trainings.append(Training(key, records, seconds, max(u for _, u in rows)))
    return sorted(trainings, key=lambda t: t.written - t.seconds)


def configs(trainings: list[Training]) -> dict[str, list]:
    """Each training's run configs, from its records (whose keys become the keys this code computes: keys name the
    code's revision of each component)."""
    from vflpriv.config.schema import RunConfig

    groups = {t.key: [RunConfig.model_validate(json.loads(r.config)) for r in t.records] for t in trainings}
    for t in trainings:
        for record, config in zip(t.records, groups[t.key]):
            record.key = config.key()
    return groups


def kind_of_run(training: Training, item: Planned) -> dict[str, str]:
    """Each record's attack kind (by position where the estimate's plan names none: an older checkout's)."""
    if getattr(item, "runs", ()):
        return dict(zip(item.runs, item.attacks))
    kinds = {}
    for r in training.records:
        attack = json.loads(r.config)["attack"]
        kinds[r.key] = f"{r.attack}{' tuned' if attack['tune'] else ''}{' no prior' if attack['prior'] == 'none' else ''}"
    return kinds


def steady(trainings: list[Training], items: list[Planned], jobs: int) -> list[Training]:
    """The trainings on a machine whose load never changes: each training of a kind costs its kind's median over
    the audit, each attack its kind's median (tuned or not, with a prior or not); records rewritten to match, the
    record times those of ``jobs`` workers taking the next training in order when free."""
    train: dict[str, list[float]] = {}
    attack: dict[str, list[float]] = {}
    for t, item in zip(trainings, items):
        train.setdefault(item.kind, []).append(t.records[0].train_seconds)
        kinds = kind_of_run(t, item)
        for r in t.records:
            attack.setdefault(kinds[r.key], []).append(r.attack_seconds)
    free, out = [0.0] * jobs, []
    for t, item in zip(trainings, items):
        seconds, kinds = statistics.median(train[item.kind]), kind_of_run(t, item)
        records = [SimpleNamespace(**{**vars(r), "train_seconds": seconds,
                                      "attack_seconds": statistics.median(attack[kinds[r.key]])}) for r in t.records]
        total = seconds + sum(r.attack_seconds for r in records)
        start = heapq.heappop(free)
        heapq.heappush(free, start + total)
        out.append(Training(t.key, records, total, start + total))
    return out


def replay(trainings: list[Training], items: list[Planned], times: list[tuple[float, float]], *,
           jobs: int) -> tuple[float, list[tuple[int, float, float, float]]]:
    """The worst factor after 5% of the runs, and (runs done, elapsed, estimated left, really left) per finish."""
    clock = SimpleNamespace(now=0.0)
    total = sum(len(t.records) for t in trainings)
    progress = RunProgress(total, console=Console(quiet=True), quiet=True, clock=lambda: clock.now, jobs=jobs)
    progress.plan(items)
    origin, end = min(s for s, _ in times), max(e for _, e in times)
    events = sorted([(s, 1, i) for i, (s, _) in enumerate(times)] + [(e, 0, i) for i, (_, e) in enumerate(times)])
    rows, worst = [], 1.0
    for when, is_start, i in events:
        clock.now = when - origin
        if is_start:
            progress.start(trainings[i].key)
            continue
        progress.finished(trainings[i].records)
        left, real = progress.remaining(), end - when
        if left is None or real <= 0:
            continue
        rows.append((progress.done, clock.now, left, real))
        if progress.done >= 0.05 * total and real >= FLOOR:
            worst = max(worst, left / real, real / left)
    return worst, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("audits", type=Path, nargs="+", help=f"audit output folders (each with {STORE_NAME})")
    parser.add_argument("--jobs", type=int, default=2, help="the workers the audits ran on (the default: 2)")
    parser.add_argument("--rows", action="store_true", help="print every estimate, not only the worst factors")
    args = parser.parse_args()
    for folder in args.audits:
        trainings = recorded(folder)
        try:
            groups = configs(trainings)
        except Exception as exc:  # noqa: BLE001 - an older store's configs this schema no longer reads
            print(f"{folder}: its configs do not validate here ({type(exc).__name__}); not replayed", file=sys.stderr)
            continue
        by_key = {t.key: t for t in trainings}
        order = schedule(groups)
        scheduled = [by_key[k] for k in order]
        timelines = (("recorded", trainings, planned_work(groups, [t.key for t in trainings])),
                     ("steady", steady(scheduled, items := planned_work(groups, order), args.jobs), items))
        for name, timeline, items in timelines:
            times = [(t.written - t.seconds, t.written) for t in timeline]
            worst, rows = replay(timeline, items, times, jobs=args.jobs)
            print(f"{folder} ({len(trainings)} trainings, {sum(len(t.records) for t in trainings)} runs), {name} "
                  f"timeline ({rows[-1][1] + rows[-1][3]:.0f} s): worst factor after 5% of the runs (and with "
                  f"at least {FLOOR:.0f} s left) {worst:.2f}")
            if args.rows:
                for done, elapsed, left, real in rows:
                    print(f"  {done:4d} runs, {elapsed:6.0f} s: estimated {left:6.0f} s left, really {real:6.0f} s "
                          f"({max(left / real, real / left):.2f})")


if __name__ == "__main__":
    main()
