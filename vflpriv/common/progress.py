"""How far a long command is: runs done of the total and the time left, on stderr (results stay on stdout).

On a terminal a rich progress bar; piped or redirected, a plain line at most every :data:`EVERY` seconds (and one at
the end), so a log shows progress without a line per run; nothing at all when quiet. The estimate is the mean time
per run finished in this command times the runs left (runs resumed from the store took no time and are not counted).
What is being computed meanwhile (``doing``: the trainings in flight, or a step before them) is shown beside it, and
said at once on a plain stream, so a long first training does not read as ``0/885`` and nothing else.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

#: Seconds between two plain progress lines when stderr is not a terminal.
EVERY = 30.0


def clock_text(seconds: float) -> str:
    """1:02:03, 4:05 or 0:07."""
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class RunProgress:
    """Runs done / total with the elapsed and the estimated remaining time (see the module)."""

    def __init__(self, total: int, *, done: int = 0, console: Console, quiet: bool = False, every: float = EVERY,
                 clock: Callable[[], float] = time.monotonic, label: str = "runs"):
        self.total, self.done, self.start_done = total, done, done
        self.console, self.quiet, self.every, self.clock = console, quiet, every, clock
        self.label, self.now = label, ""
        self.started = self.last = clock()
        self.bar: Progress | None = None
        if not quiet and console.is_terminal:
            self.bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                TextColumn("left"), TimeRemainingColumn(), TextColumn("{task.fields[now]}"),
                                console=console, transient=True)

    def __enter__(self) -> RunProgress:
        if self.bar is not None:
            self.bar.start()
            self.task = self.bar.add_task("runs", total=self.total, completed=self.done, now=self.now)
        return self

    def doing(self, what: str, *, say: bool = True) -> None:
        """What is being computed now; a plain stream hears of it at once while no run has finished here yet (the
        first minutes of an audit) unless ``say`` is off, later with the next periodic line."""
        self.now = what
        if self.bar is not None:
            self.bar.update(self.task, now=what)
        elif say and not self.quiet and self.done == self.start_done:
            self.console.print(self.line(), markup=False)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()
        elif not self.quiet and self.done > self.start_done and exc[0] is None:
            self.console.print(self.line(), markup=False)

    def remaining(self) -> float | None:
        """Seconds left by the mean time of the runs finished here; None before the first."""
        finished = self.done - self.start_done
        if finished <= 0:
            return None
        return (self.clock() - self.started) / finished * (self.total - self.done)

    def line(self) -> str:
        left = self.remaining()
        share = self.done / self.total if self.total else 1.0
        return (f"{self.label} {self.done}/{self.total} ({share:.0%}), {clock_text(self.clock() - self.started)} elapsed"
                + (f", about {clock_text(left)} left" if left is not None and self.done < self.total else "")
                + (f"; now: {self.now}" if self.now and self.done < self.total else ""))

    def advance(self, n: int) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.advance(self.task, n)
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
