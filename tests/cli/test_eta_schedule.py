"""The time left on a synthetic audit whose true remaining time is known at every step: two workers, the sweep's
order (one training of each kind first), kinds of training and of attack run that cost tenfold apart."""

from __future__ import annotations

import heapq
from types import SimpleNamespace

from rich.console import Console

from vflpriv.common.progress import Planned, RunProgress, WorkEstimate

#: (training kind, training seconds, ((attack kind, seconds), ...), how many): an audit's shape in miniature.
SHAPE = [
    ("splitnn|iso|", 1.0, (("mc tuned", 4.0), ("gc tuned", 1.0), ("mc-mixmatch tuned", 10.0)), 24),
    ("splitnn|dp-gaussian|", 15.0, (("mc tuned", 4.0), ("gc tuned", 1.0), ("mc-mixmatch tuned", 10.0)), 9),
    ("splitnn|iso|mc-active", 1.0, (("mc-active", 8.0),), 9),
    ("splitnn|dp-gaussian|mc-active", 15.0, (("mc-active", 8.0),), 3),
    ("splitnn|none|", 1.0, (("gc no prior", 0.1),), 30),
]


def audit() -> tuple[list[Planned], dict[str, tuple[float, list]]]:
    """The planned trainings in the sweep's order (one of each kind, then more runs first) and each one's true
    seconds and records."""
    items, truth, samples, rest = [], {}, [], []
    for kind, train, attacks, count in SHAPE:
        for i in range(count):
            key = f"{kind}#{i}"
            runs = tuple(f"{key}/{a}" for a, _ in attacks)
            item = Planned(key=key, kind=kind, builds=False, attacks=tuple(a for a, _ in attacks), label=key, runs=runs)
            records = [SimpleNamespace(key=run, training_key=key, attack=a.split(" ")[0], train_seconds=train,
                                       attack_seconds=s) for run, (a, s) in zip(runs, attacks)]
            truth[key] = (train + sum(s for _, s in attacks), records)
            (rest if i else samples).append(item)
    return samples + sorted(rest, key=lambda p: -len(p.attacks)), truth


def worst_factor(jobs: int = 2) -> float:
    """The worst factor between the estimate and the true time left, after 5% of the runs, with 30 s or more left."""
    items, truth = audit()
    clock = SimpleNamespace(now=0.0)
    total = sum(len(records) for _, records in truth.values())
    progress = RunProgress(total, console=Console(quiet=True), quiet=True, clock=lambda: clock.now, jobs=jobs)
    progress.plan(items)
    free, ends = [0.0] * jobs, []
    for item in items:
        start = heapq.heappop(free)
        heapq.heappush(free, start + truth[item.key][0])
        ends.append((start + truth[item.key][0], item.key))
    end, worst = max(e for e, _ in ends), 1.0
    for when, key in sorted(ends):
        clock.now = when
        progress.finished(truth[key][1])
        left, real = progress.remaining(), end - when
        if progress.done >= 0.05 * total and real >= 30 and left is not None:
            worst = max(worst, left / real, real / left)
    return worst


def test_the_time_left_is_within_a_factor_of_1_5_after_5_percent_of_the_runs():
    assert worst_factor() < 1.5
    assert worst_factor(jobs=1) < 1.5


def test_costing_every_training_at_the_mean_is_caught(monkeypatch):
    """The bug this estimate replaced: every kind of training (the active adversary's own under dp-gaussian
    included) at the mean of the trainings seen."""
    def mean_of_all(self, item):
        seen = [s for times in self.trainings.values() for s in times]
        return sum(seen) / len(seen) if seen else None

    monkeypatch.setattr(WorkEstimate, "training", mean_of_all)
    assert worst_factor() > 1.5


def test_costing_an_attack_by_its_name_alone_is_caught(monkeypatch):
    """A canary control's untuned gc without a prior is not a tuned gc, nor is an unseen attack the mean of all."""
    def mean_of_all(self, kind):
        seen = [s for times in self.attacks.values() for s in times]
        return sum(seen) / len(seen) if seen else None

    monkeypatch.setattr(WorkEstimate, "attack", mean_of_all)
    assert worst_factor() > 1.5


def test_an_unseen_active_training_costs_what_its_defense_costs():
    """dp-gaussian's active adversary trains as slowly as dp-gaussian's passive training, not as the mean training."""
    estimate = WorkEstimate()
    passive = Planned(key="a", kind="splitnn|dp-gaussian|", builds=False, attacks=("mc tuned",), label="a")
    other = Planned(key="b", kind="splitnn|iso|", builds=False, attacks=("mc tuned",), label="b")
    estimate.observe(passive, 15.0, [("mc tuned", 4.0)])
    estimate.observe(other, 1.0, [("mc tuned", 4.0)])
    active = Planned(key="c", kind="splitnn|dp-gaussian|mc-active", builds=False, attacks=("mc-active",), label="c")
    assert estimate.training(active) == 15.0
    assert estimate.attack("mc-active") == 4.0  # no mc-active seen: the mean attack
    assert estimate.attack("mc") == 4.0 and estimate.attack("mc no prior") == 4.0  # its name's other kinds
