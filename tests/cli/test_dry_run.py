"""``--dry-run`` of evaluate, audit, sweep, tune and reproduce: every setting checked as the real command checks it,
the plan printed (runs, trainings, what the store already holds), nothing trained, nothing written (no output folder,
store, cache entry); bad input is still one ``error:`` line and exit code 2."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import pytest
from cli_helpers import one_error_line, wrote_nothing
from typer.testing import CliRunner

from vflpriv.cli import app

TINY = ["--set", "partition.labeled=60", "--set", "partition.aux=20", "--set", "finetune.epochs=1", "--jobs", "1"]


@pytest.fixture
def no_training(monkeypatch):
    """Any training (a run's, or a conformance check's) fails the test: a dry run builds no federation."""

    def trained(*args, **kwargs):
        raise AssertionError("a dry run built a federation to train")

    import vflpriv.runner.execution as execution
    import vflpriv.workflows.conformance as conformance

    monkeypatch.setattr(execution, "build_federation", trained)
    monkeypatch.setattr(conformance, "build_federation", trained)


def _grid(tmp_path: Path) -> Path:
    grid = tmp_path / "grid.yaml"
    grid.write_text("methods: [splitnn, local-simsiam]\nattacks: [mc]\ndefenses: [{name: iso, phase: finetune, sweep: "
                    "true}]\nstrengths: [1, 5]\nseeds: [0, 1]\npartition: {labeled: 60, aux: 20}\njobs: 1\n")
    return grid


#: A command's dry run and the plan it must print: (runs, trainings).
PLANS = {
    "evaluate": (lambda tmp: ["evaluate", "--attack", "mc,gc", "--defense", "iso", "--strengths", "1,5,25",
                              "--seeds", "0,1", *TINY], (12, 6)),  # two attacks share each training
    "sweep": (lambda tmp: ["sweep", str(_grid(tmp))], (8, 8)),
    "reproduce": (lambda tmp: ["reproduce", "oneshot-table1", "--quick", "--jobs", "1"], None),
    "audit": (lambda tmp: ["audit", "--method", "splitnn", "--attacks", "mc", "--defenses", "iso", "--seeds", "0,1",
                           "--phases", "finetune", "--canaries", "0", *TINY], None),
    "tune": (lambda tmp: ["tune", "--defense", "iso", "--seeds", "0,1,2", "--steps", "2", *TINY], (6, 6)),
}


@pytest.mark.parametrize("command", sorted(PLANS))
def test_a_dry_run_prints_the_plan_and_trains_and_writes_nothing(command, tmp_path, monkeypatch, no_training):
    args, expected = PLANS[command]
    args = args(tmp_path)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    with wrote_nothing(tmp_path, Path(os.environ["VFLPRIV_CACHE"])):
        result = CliRunner().invoke(app, [*args, "--out", str(out), "--dry-run"])
    assert result.exit_code == 0, result.output
    plan = re.search(r"(\d+) runs? on (\d+) trainings?: 0 already in the store, (\d+) to run \(dry run: nothing "
                     r"trained, nothing written\)", result.output)
    assert plan, result.output
    runs, trainings, to_run = map(int, plan.groups())
    assert to_run == runs
    if expected is not None:
        assert (runs, trainings) == expected, result.output
    assert not out.exists()


def test_the_audits_dry_run_plans_the_audits_grid_and_names_the_pairs_it_leaves_out(tmp_path, no_training):
    from vflpriv.cli.audit import build_audit
    from vflpriv.workflows.audit import audit_grid

    args = ["--method", "splitnn", "--attacks", "mc,direction", "--defenses", "iso,marvell", "--seeds", "0,1",
            "--phases", "finetune"]
    result = CliRunner().invoke(app, ["audit", *args, "--out", str(tmp_path / "out"), "--dry-run"])
    assert result.exit_code == 0, result.output
    cfg = build_audit(config=None, method="splitnn", dataset=None, attacks="mc,direction", defenses="iso,marvell",
                      phases="finetune", seeds="0,1", jobs=None, backend=None, device=None, all_adversaries=False,
                      overrides=[])
    runs, skipped = audit_grid(cfg)
    assert f"{len(runs)} runs on {len({r.training_key() for r in runs})} trainings" in result.output
    assert "conformance of splitnn: a few short trainings before the audit's (dry run: not run)" in result.output
    assert "not run: direction x none (finetune): attack 'direction' needs a binary task" in result.output
    assert "not run: * x marvell (finetune): defense 'marvell' needs a binary task" in result.output
    assert len(skipped) == 2


def test_a_dry_run_counts_what_the_store_holds_and_leaves_it_as_it_was(tmp_path, monkeypatch):
    out = tmp_path / "out"
    base = ["evaluate", "--attack", "mc", "--defense", "none", "--set", "attack.prior=none", *TINY, "--out", str(out)]
    done = CliRunner().invoke(app, [*base, "--seeds", "0"])
    assert done.exit_code == 0, done.output
    store = out / "results.sqlite"
    digest = hashlib.sha256(store.read_bytes()).hexdigest()
    import vflpriv.runner.execution as execution

    monkeypatch.setattr(execution, "build_federation", lambda *a, **k: pytest.fail("a dry run trained"))
    with wrote_nothing(tmp_path, Path(os.environ["VFLPRIV_CACHE"])):
        result = CliRunner().invoke(app, [*base, "--seeds", "0,1,2", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "3 runs on 3 trainings: 1 already in the store, 2 to run (dry run" in result.output
    assert hashlib.sha256(store.read_bytes()).hexdigest() == digest


#: Bad input to each command's dry run, and what its one error line names: a setting the parser refuses, and one
#: only planning finds (more labels than aligned samples).
REFUSED = {
    "evaluate-method": (["evaluate", "--method", "nope"], "valid methods"),
    "evaluate-planning": (["evaluate", "--set", "partition.labeled=5000"], "exceeds the"),
    "audit-attack": (["audit", "--method", "splitnn", "--attacks", "nope"], "nope"),
    "audit-planning": (["audit", "--method", "splitnn", "--attacks", "mc", "--set", "partition.labeled=5000"],
                       "exceeds the"),
    "tune-steps": (["tune", "--steps", "99"], "--steps must lie in [0, 30]"),
    "tune-planning": (["tune", "--set", "partition.labeled=5000"], "exceeds the"),
    "reproduce-name": (["reproduce", "nope"], "nope"),
    "reproduce-planning": (["reproduce", "oneshot-table1", "--quick", "--set", "partition.labeled=5000"],
                           "exceeds the"),
    "sweep-planning": (["sweep", "GRID", "--set", "partition.labeled=5000"], "exceeds the"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_bad_input_to_a_dry_run_is_one_error_line_and_writes_nothing(case, tmp_path, monkeypatch, no_training):
    args, needle = REFUSED[case]
    args = [str(_grid(tmp_path)) if a == "GRID" else a for a in args]
    monkeypatch.chdir(tmp_path)
    with wrote_nothing(tmp_path, Path(os.environ["VFLPRIV_CACHE"])):
        result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "out"), "--dry-run"])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, needle)


def test_a_dry_run_checks_the_output_folder_as_the_run_would(tmp_path, no_training):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder\n")
    result = CliRunner().invoke(app, ["evaluate", *TINY, "--out", str(blocked / "out"), "--dry-run"])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, "is a file, not a folder")


def test_the_audits_dry_run_checks_the_active_adversarys_deferred_runs_and_says_they_may_not_run(tmp_path, no_training):
    from vflpriv.cli.audit import build_audit
    from vflpriv.workflows.audit import audit_grid
    from vflpriv.workflows.audit_recipes import defer_active

    result = CliRunner().invoke(app, ["audit", "--method", "splitnn", "--attacks", "mc,mc-active", "--defenses", "iso",
                                      "--seeds", "0", "--phases", "finetune", "--out", str(tmp_path / "out"),
                                      "--dry-run"])
    assert result.exit_code == 0, result.output
    cfg = build_audit(config=None, method="splitnn", dataset=None, attacks="mc,mc-active", defenses="iso",
                      phases="finetune", seeds="0", jobs=None, backend=None, device=None, all_adversaries=False,
                      overrides=[])
    runs, _ = audit_grid(cfg)
    _, deferred = defer_active(runs)
    assert deferred
    assert f"{len(runs)} runs on {len({r.training_key() for r in runs})} trainings" in result.output
    assert f"of them, {len(deferred)} run(s) of the active adversary at the defenses' other strengths" in result.output
