"""How far a long command is: runs done of the total, the time left and what is running, on stderr (results stay on
stdout).

On a terminal a rich progress bar; piped or redirected, a plain line at most every :data:`EVERY` seconds (and one at
the end), so a log shows progress without a line per run; nothing at all when quiet.

The time left is estimated from the planned work, kind by kind (:class:`WorkEstimate`), not from the mean time of
the runs finished so far: a sweep runs its costly trainings first (those that build a shared state, such as a
pretraining or a CAE autoencoder) and its runs differ tenfold in cost (a tuned MixMatch against a direction score),
so a mean over the first runs was off by a factor of 20 at 1% of an audit. Each kind of training (method, defense,
acting attack, whether it builds a shared state) and each kind of attack run (tuned or not, with its prior or without,
as a canary control) costs what its finished ones cost, an unseen kind what its nearest seen like costs
(:class:`WorkEstimate`; the sweep runs one training of each kind early, ``vflpriv.tradeoff.sweep.samples_first``, so
few stay unseen for long); the wall-clock rate at which planned work gets done (parallel workers, a loaded machine)
is measured on the whole command so far. A window over the last minutes was tried and replayed on two recorded
audits (``benchmarks/eta_replay.py``): on a machine whose load rose mid-audit it followed each lull and was worse
(worst factor 4.7 against 2.7), so it is not used. A running training of a kind none has finished (the first
CAE autoencoder) counts as twice its elapsed time (half done, as every running training), and the trainings of its
kind still to run as much; until a training of the common kind (one that builds nothing) has finished, it says it is
still estimating. Runs resumed from the store took no time and are not counted; runs another sweep computed meanwhile,
read from the store (``read``), count as done at once and out of the rate too.
What is being computed meanwhile (``doing``: the trainings in flight, or a step before them) is shown beside it, and
said at once on a plain stream, so a long first training does not read as ``0/885`` and nothing else.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

#: Seconds between two plain progress lines when stderr is not a terminal.
EVERY = 30.0
#: Trainings named on a progress line as running.
SHOWN_RUNNING = 2


def clock_text(seconds: float) -> str:
    """1:02:03, 4:05 or 0:07."""
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


@dataclass(frozen=True)
class Planned:
    """One training a command will run, as the estimate sees it (``vflpriv.tradeoff.sweep.planned_work``)."""

    key: str  #: its training key, which its records carry
    kind: str  #: trainings of one kind cost alike (method, defense, acting attack)
    builds: bool  #: it builds a shared state (a pretraining, an autoencoder) that later trainings load
    attacks: tuple[str, ...]  #: the attack kind of each run it computes (``mc tuned``, ``gc no prior``, ``mc-active``)
    label: str  #: what it is, for "now: ..." while no caller says what is in flight
    runs: tuple[str, ...] = ()  #: each run's key, beside ``attacks`` (a record's attack kind); none: by attack name


class WorkEstimate:
    """Seconds per kind of work, from what finished, each unseen kind priced from its nearest seen like.

    A training: its kind's mean (method, defense, acting attack; building a shared state or not), else the mean of
    its defense's trainings under another acting attack (the active adversary's own training costs what its
    defense's passive training costs, not the mean of every defense), else of its acting attack's under other
    defenses, else of every training that builds (or does not build) as it does. An attack: its kind's mean (tuned
    or not, with a prior or without, as a canary control runs), else its name's under another kind, else the mean
    of every attack seen. None while nothing comparable has finished."""

    def __init__(self) -> None:
        self.trainings: dict[tuple[str, bool], list[float]] = defaultdict(list)
        self.attacks: dict[str, list[float]] = defaultdict(list)

    def observe(self, item: Planned, train_seconds: float, attack_seconds: Iterable[tuple[str, float]]) -> None:
        self.trainings[(item.kind, item.builds)].append(train_seconds)
        for kind, seconds in attack_seconds:
            self.attacks[kind].append(seconds)

    def training(self, item: Planned) -> float | None:
        method, defense, acting = (item.kind.split("|") + ["", ""])[:3]
        likes = (lambda k: k == item.kind,
                 lambda k: k.startswith(f"{method}|{defense}|"),
                 lambda k: k.startswith(f"{method}|") and k.endswith(f"|{acting}"),
                 lambda k: True)
        for like in likes:
            seen = [s for (kind, builds), times in self.trainings.items() if builds == item.builds and like(kind)
                    for s in times]
            if seen:
                return statistics.fmean(seen)
        return None

    def attack(self, kind: str) -> float | None:
        name = kind.split(" ")[0]
        for like in (lambda k: k == kind, lambda k: k.split(" ")[0] == name, lambda k: True):
            seen = [s for k, times in self.attacks.items() if like(k) for s in times]
            if seen:
                return statistics.fmean(seen)
        return None

    def cost(self, item: Planned) -> float | None:
        parts = [self.training(item), *(self.attack(kind) for kind in item.attacks)]
        return None if any(p is None for p in parts) else sum(parts)


class RunProgress:
    """Runs done / total, the elapsed time, the estimated time left and the trainings running (see the module).

    ``plan(items)`` gives the trainings to run in the order they are dispatched to ``jobs`` workers;
    ``finished(records)`` counts a training's records and learns their costs. Without a plan (``advance(n)`` only)
    the time left is the mean time per run finished here times the runs left."""

    def __init__(self, total: int, *, done: int = 0, console: Console, quiet: bool = False, every: float = EVERY,
                 clock: Callable[[], float] = time.monotonic, jobs: int = 1, label: str = "runs"):
        self.total, self.done, self.start_done = total, done, done
        self.console, self.quiet, self.every, self.clock, self.jobs = console, quiet, every, clock, max(1, jobs)
        self.label, self.now, self.read_here = label, "", 0
        self.started = self.last = clock()
        self.pending: list[Planned] = []
        self.starts: dict[str, float] = {}
        self.finished_items: list[Planned] = []
        self.estimate = WorkEstimate()
        self.bar: Progress | None = None
        if not quiet and console.is_terminal:
            self.bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                TextColumn("{task.fields[left]}"), console=console, transient=True)

    def __enter__(self) -> RunProgress:
        if self.bar is not None:
            self.bar.start()
            self.task = self.bar.add_task("runs", total=self.total, completed=self.done, left="")
        return self

    def doing(self, what: str, *, say: bool = True) -> None:
        """What is being computed now; a plain stream hears of it at once while no run has finished here yet (the
        first minutes of an audit) unless ``say`` is off, later with the next periodic line."""
        self.now = what
        if self.bar is not None:
            self.bar.update(self.task, left=self._left_text())
        elif say and not self.quiet and self.done == self.start_done:
            self.console.print(self.line(), markup=False)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
        elif not self.quiet and (self.done > self.start_done or self.read_here) and exc[0] is None:
            self.console.print(self.line(), markup=False)

    def plan(self, items: list[Planned]) -> None:
        """The trainings still to run, in dispatch order (replacing an earlier plan)."""
        self.pending = list(items)

    def running(self) -> list[Planned]:
        """The trainings dispatched and not finished: the first ``jobs`` of the plan (dispatch follows it)."""
        return self.pending[:self.jobs]

    def start(self, key: str) -> None:
        """The training ``key`` started (how long it has run bounds its cost while none of its kind finished)."""
        self.starts[key] = self.clock()

    def _costs(self) -> list[float | None]:
        """The estimated cost of each finished, then each planned training (see the module)."""
        items = [*self.finished_items, *self.pending]
        costs = [self.estimate.cost(item) for item in items]
        running, guess = {p.key for p in self.running()}, {}
        for i, item in enumerate(items):
            if costs[i] is None and item.key in running and item.key in self.starts:
                costs[i] = guess[item.builds] = max(guess.get(item.builds, 0.0),
                                                    2 * (self.clock() - self.starts[item.key]))
        return [guess.get(item.builds) if c is None else c for item, c in zip(items, costs)]

    def remaining(self) -> float | None:
        """Seconds left: the planned work left at the rate work got done so far (see the module); None before it
        can be estimated."""
        if not self.pending and not self.finished_items:
            return self._per_run()
        costs = self._costs()
        if not self.finished_items or any(c is None for c in costs):
            return None
        done, planned = costs[:len(self.finished_items)], costs[len(self.finished_items):]
        running = planned[:self.jobs]  # counted as half done
        done_work = sum(done) + sum(running) / 2
        left_work = sum(planned) - sum(running) / 2
        return (self.clock() - self.started) / done_work * left_work if done_work > 0 else None

    def _per_run(self) -> float | None:
        finished = self.done - self.start_done
        if finished <= 0:
            return None
        return (self.clock() - self.started) / finished * (self.total - self.done)

    def line(self) -> str:
        share = self.done / self.total if self.total else 1.0
        text = f"{self.label} {self.done}/{self.total} ({share:.0%}), {clock_text(self.clock() - self.started)} elapsed"
        text += f" ({self.read_here} read from the store, computed meanwhile)" if self.read_here else ""
        left = self._left_text()
        return text + (("; " if left.startswith("now:") else ", ") + left if left and self.done < self.total else "")

    def _left_text(self) -> str:
        """The time left (once a run finished here) and what is being computed: the trainings in flight as
        ``doing`` names them, else the first ``jobs`` of the plan."""
        left = self.remaining()
        parts = []
        if left is not None:
            parts.append(f"about {clock_text(left)} left")
        elif self.done > self.start_done:
            parts.append("time left: estimating")
        running = self.running()
        if self.now:
            parts.append(f"now: {self.now}")
        elif running:
            more = len(running) - SHOWN_RUNNING
            parts.append("now: " + ", ".join(r.label for r in running[:SHOWN_RUNNING]) + (
                f" and {more} more" if more > 0 else ""))
        return "; ".join(parts)

    def finished(self, records: list, *, new: int | None = None) -> None:
        """A training's records arrived: count them (or the ``new`` of them: a run recomputed counts once), and learn
        what its kind and its attacks cost."""
        if records:
            key = records[0].training_key
            item = next((p for p in self.pending if p.key == key), None)
            if item is not None:
                self.pending.remove(item)
                self.finished_items.append(item)
                kinds = dict(zip(item.runs, item.attacks))
                self.estimate.observe(item, records[0].train_seconds,
                                      [(kinds.get(getattr(r, "key", None), r.attack), r.attack_seconds)
                                       for r in records])
        self.advance(len(records) if new is None else new)

    def read(self, n: int) -> None:
        """``n`` runs another sweep computed while this one ran, read from the store: done at once, and taking no time
        here (out of the rate of runs finished here, as runs resumed from the store)."""
        self.start_done += n
        self.read_here += n
        self.advance(n)

    def advance(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(self.task, advance=n, left=self._left_text() if self.done < self.total else "")
        elif not self.quiet and self.done < self.total and self.clock() - self.last >= self.every:
            self.last = self.clock()
            self.console.print(self.line(), markup=False)


@contextlib.contextmanager
def stage(console: Console, text: str) -> Iterator[None]:
    """A step before the runs (planning, conformance checks) named on a terminal while it lasts (a transient
    spinner: a refusal after it still reads as one ``error:`` line); nothing on a plain stream, where the progress
    line of the runs says what is computed."""
    if console.is_terminal and not console.quiet:
        with console.status(text):
            yield
    else:
        yield
