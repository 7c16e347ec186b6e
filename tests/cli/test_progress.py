"""Progress of long commands: a bar with runs done / total and the time left on a terminal, a plain line at most
every 30 s (and one at the end) when piped, nothing with --quiet."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from typer.testing import CliRunner

from vflpriv.cli import app
from vflpriv.common.progress import Planned, RunProgress, clock_text


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _console(*, terminal: bool) -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, force_terminal=terminal, width=120), buffer


def test_piped_progress_is_a_plain_line_every_30_seconds_with_the_time_left():
    console, buffer = _console(terminal=False)
    clock = Clock()
    with RunProgress(10, done=2, console=console, clock=clock) as progress:
        clock.now = 10.0
        progress.advance(1)  # 10 s: too soon for a line
        clock.now = 40.0
        progress.advance(1)  # 40 s for 2 runs of the 8 to run: 20 s each, 6 left
        clock.now = 50.0
        progress.advance(1)  # 10 s after the last line: none
        clock.now = 100.0
        progress.advance(5)
    lines = buffer.getvalue().splitlines()
    assert lines == ["runs 4/10 (40%), 0:40 elapsed, about 2:00 left", "runs 10/10 (100%), 1:40 elapsed"]


def test_quiet_progress_prints_nothing_and_a_resumed_command_with_nothing_to_run_is_silent():
    for quiet, done in ((True, 0), (False, 5)):
        console, buffer = _console(terminal=False)
        with RunProgress(5, done=done, console=console, quiet=quiet, clock=Clock()) as progress:
            progress.advance(5 - done)
        assert buffer.getvalue() == ""


def test_on_a_terminal_a_bar_shows_runs_done_of_the_total():
    console, buffer = _console(terminal=True)
    with RunProgress(4, console=console) as progress:
        progress.advance(2)
        progress.bar.refresh()
    assert "2/4" in buffer.getvalue()


def test_clock_text():
    assert (clock_text(7), clock_text(245), clock_text(3723)) == ("0:07", "4:05", "1:02:03")


def test_evaluate_reports_progress_unless_quiet(tmp_path):
    args = ["evaluate", "--seeds", "0", "--strengths", "1", "--set", "finetune.epochs=1", "--set", "attack.prior=none",
            "--jobs", "1"]
    loud = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "a")])
    assert loud.exit_code == 0, loud.output
    assert "runs 1/1 (100%)" in loud.output
    quiet = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "b"), "--quiet"])
    assert quiet.exit_code == 0 and "runs 1/1" not in quiet.output and "CAP" in quiet.output


class _Record:
    def __init__(self, item, attack: str, train: float, seconds: float):
        self.training_key, self.attack, self.train_seconds, self.attack_seconds = item.key, attack, train, seconds


def _item(i: int, *, kind: str = "splitnn|iso|", builds: bool = False, attacks=("mc", "gc")) -> Planned:
    return Planned(key=str(i), kind=kind, builds=builds, attacks=tuple(attacks), label=f"training {i}")


def test_time_left_comes_from_the_planned_work_per_kind_not_from_the_first_runs():
    """Two trainings that build a shared state (30 s each) come first, then 98 of 1 s with a 2 s and a 0.5 s attack:
    at 5% of the runs the mean time per run so far says 4.3 times the truth; the planned work per kind is right."""
    items = [_item(i, kind="splitnn|cae|", builds=True) for i in range(2)] + [_item(i) for i in range(2, 100)]
    cost = {True: 30.0, False: 1.0}
    clock = Clock()
    console, buffer = _console(terminal=False)
    progress = RunProgress(200, console=console, clock=clock, every=0.0)
    progress.plan(items)
    for item in items[:5]:
        assert progress.running() == [item]
        clock.now += cost[item.builds] + 2.5
        progress.finished([_Record(item, "mc", cost[item.builds], 2.0), _Record(item, "gc", cost[item.builds], 0.5)])
    truth = 95 * 3.5
    assert 1 / 1.2 < progress.remaining() / truth < 1.2
    assert clock.now / 10 * 190 / truth > 4  # the estimate this replaces
    assert buffer.getvalue().splitlines()[-1].endswith("left; now: training 5")


def test_an_unseen_kind_costs_what_its_like_cost_and_nothing_is_estimated_before_a_common_training_finished():
    items = [_item(0, kind="splitnn|cae|", builds=True), _item(1), _item(2, kind="splitnn|mid|", attacks=("mc", "bli"))]
    clock = Clock()
    console, _ = _console(terminal=False)
    progress = RunProgress(6, console=console, clock=clock, jobs=2)
    progress.plan(items)
    assert progress.running() == items[:2]
    clock.now = 40.0
    progress.finished([_Record(items[0], "mc", 30.0, 4.0), _Record(items[0], "gc", 30.0, 2.0)])
    assert progress.remaining() is None and "time left: estimating" in progress.line()  # only a builder has finished
    clock.now = 50.0
    progress.finished([_Record(items[1], "mc", 2.0, 4.0), _Record(items[1], "gc", 2.0, 2.0)])
    # the mid training: a training that builds nothing costs 2 s, mc 4 s, and bli (unseen) the mean attack, 3 s
    assert progress.estimate.cost(items[2]) == 2.0 + 4.0 + 3.0
    done, left = 36.0 + 8.0 + 9.0 / 2, 9.0 / 2  # the running training counts as half done
    assert progress.remaining() == pytest.approx(50.0 / done * left)


def test_a_long_first_builder_counts_as_twice_its_elapsed_time_and_its_like_as_much_not_as_estimating():
    """The quick audit's shape: CAE's autoencoder (a builder, 200 s) runs beside the common trainings (1 s + 3 s of
    attacks); once a common one finished, the builder counts as twice its elapsed time, the next builder as much."""
    items = [_item(0, kind="splitnn|cae|", builds=True), _item(1), _item(2), _item(3, kind="splitnn|cae|", builds=True)]
    clock = Clock()
    console, _ = _console(terminal=False)
    progress = RunProgress(8, console=console, clock=clock, jobs=2)
    progress.plan(items)
    progress.start("0")
    progress.start("1")
    clock.now = 4.0
    progress.finished([_Record(items[1], "mc", 1.0, 2.0), _Record(items[1], "gc", 1.0, 1.0)])
    progress.start("2")
    # done: the common training (4 s of work) and half of each running one (the builder: 2 x 4 s; the common: 4 s);
    # left: their other halves and the next builder (8 s)
    assert progress.remaining() == pytest.approx(4.0 / (4.0 + (8.0 + 4.0) / 2) * ((8.0 + 4.0) / 2 + 8.0))
    clock.now = 100.0
    assert progress.remaining() == pytest.approx(100.0 / (4.0 + 100.0 + 2.0) * (100.0 + 2.0 + 200.0))


def test_what_is_computed_is_said_at_once_until_the_first_run_finishes_then_with_the_periodic_line():
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=False, width=400)
    clock = Clock()
    with RunProgress(6, console=console, clock=clock, label="tune: strength 2 of at most 7, runs") as progress:
        progress.doing("splitnn, iso 5, seed 0: training, 3 attacks (3 tuned) and the prior")
        clock.now = 40.0
        progress.advance(3)  # the periodic line names what is still in flight
        progress.doing("splitnn, iso 5, seed 1: training")  # a run finished here: no extra line
        clock.now = 80.0
        progress.advance(3)
    assert buffer.getvalue().splitlines() == [
        "tune: strength 2 of at most 7, runs 0/6 (0%), 0:00 elapsed; now: splitnn, iso 5, seed 0: training, 3 attacks "
        "(3 tuned) and the prior",
        "tune: strength 2 of at most 7, runs 3/6 (50%), 0:40 elapsed, about 0:40 left; now: splitnn, iso 5, seed 0: "
        "training, 3 attacks (3 tuned) and the prior",
        "tune: strength 2 of at most 7, runs 6/6 (100%), 1:20 elapsed"]


def test_tune_counts_the_strengths_of_its_bisection_and_the_audit_says_what_its_first_minutes_do(tmp_path,
                                                                                                monkeypatch):
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path / "cache"))
    quick = ["--set", "finetune.epochs=2", "--set", "model.hidden=16", "--set", "model.out_dim=8", "--jobs", "1"]
    tune = CliRunner().invoke(app, ["tune", "--method", "splitnn", "--attack", "gc", "--defense", "iso", "--seeds", "0",
                                    "--steps", "1", "--tolerance", "1", "--out", str(tmp_path / "t"), "--set",
                                    "attack.prior=aux", "--set", "attack.prior_epochs=5", *quick])
    assert tune.exit_code == 0, tune.output
    for k in (1, 2):  # the strongest end, the weakest: each its own count of at most steps + 2 strengths
        assert f"tune: strength {k} of at most 3 (lambda=" in tune.stderr
        assert "runs 1/1 (100%)" in tune.stderr
    audit = CliRunner().invoke(app, ["audit", "--method", "splitnn", "--attacks", "gc", "--defenses", "none",
                                     "--seeds", "0", "--no-tune-attacks", "--canaries", "0", "--out",
                                     str(tmp_path / "a"), "--set", "audit.prior=aux", "--set", "audit.prior_epochs=5",
                                     *quick])
    assert audit.exit_code == 0, audit.output
    # planning and conformance show a spinner on a terminal only (a refusal after them is one error line); then the
    # runs say what they compute
    lines = audit.stderr.splitlines()
    assert lines[0] == "runs 0/1 (0%), 0:00 elapsed; now: splitnn, no defense, seed 0: training, 1 attack and the prior"


def test_a_step_before_the_runs_is_named_on_a_terminal_only():
    from vflpriv.common.progress import stage

    for terminal in (True, False):
        console, buffer = _console(terminal=terminal)
        with stage(console, "conformance checks of splitnn"):
            pass
        assert ("conformance checks of splitnn" in buffer.getvalue()) == terminal


def test_a_run_recomputed_after_the_final_read_is_counted_once(tmp_path, monkeypatch):
    """Review st2 left: a record another sweep deleted before this sweep's final read is recomputed, and the count
    passed its total ("runs 2/1"); each planned run counts once."""
    from vflpriv.store.sqlite import Store

    read = Store.get_many

    def deleted_first(self, keys):
        monkeypatch.setattr(Store, "get_many", read)
        self.forget(keys)  # another sweep's start-up check deletes the record (e.g. damaged) meanwhile
        return read(self, keys)

    monkeypatch.setattr(Store, "get_many", deleted_first)
    result = CliRunner().invoke(app, ["evaluate", "--seeds", "0", "--strengths", "1", "--set", "finetune.epochs=1",
                                      "--set", "attack.prior=none", "--jobs", "1", "--out", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    assert "runs 1/1 (100%)" in result.stderr and "runs 2/1" not in result.stderr


def test_runs_read_from_the_store_count_as_done_at_once_and_not_in_the_rate_of_runs_finished_here():
    """A training another sweep finished while this one ran was read and never counted: the line stayed at 1/4 and
    the time left waited for it (30 s: 3 runs left at 10 s each); now 3/4 at once, and 10 s left for the last."""
    console, buffer = _console(terminal=False)
    clock = Clock()
    with RunProgress(4, console=console, clock=clock, every=0.0) as progress:
        clock.now = 10.0
        progress.advance(1)
        progress.read(2)
        clock.now = 20.0
        progress.advance(1)
    lines = buffer.getvalue().splitlines()
    assert lines[:2] == ["runs 1/4 (25%), 0:10 elapsed, about 0:30 left",
                         "runs 3/4 (75%), 0:10 elapsed (2 read from the store, computed meanwhile), "
                         "about 0:10 left"]
    assert lines[-1] == "runs 4/4 (100%), 0:20 elapsed (2 read from the store, computed meanwhile)"


def test_evaluate_counts_a_training_another_sweep_ran_after_its_start_up_check(tmp_path, monkeypatch):
    """Read rather than run, the training had no line: the progress said nothing, as if nothing were done."""
    import vflpriv.tradeoff.sweep as sweep_module
    from vflpriv.store.sqlite import Store

    share, path = sweep_module.gpu_share, tmp_path / "results.sqlite"

    def another_sweep_runs_it_first(configs, **kwargs):  # after the count of what is stored, before the loop
        monkeypatch.setattr(sweep_module, "gpu_share", share)
        with Store(path) as other:
            sweep_module.sweep(configs, other)
        return share(configs, **kwargs)

    monkeypatch.setattr(sweep_module, "gpu_share", another_sweep_runs_it_first)
    result = CliRunner().invoke(app, ["evaluate", "--seeds", "0", "--strengths", "1", "--set", "finetune.epochs=1",
                                      "--set", "attack.prior=none", "--jobs", "1", "--out", str(tmp_path / "a"),
                                      "--store", str(path)])
    assert result.exit_code == 0, result.output
    assert "1 already in the store, 0 to run" not in result.output
    assert "runs 1/1 (100%)" in result.stderr and "(1 read from the store, computed meanwhile)" in result.stderr
