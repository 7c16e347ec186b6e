"""Corrupt state and broken numbers: a bad cache entry is discarded and recomputed (same numbers), a
diverged attack or prior fails its run with the reason, an incomplete sweep gets no CAP, and two sweeps
sharing a store compute each training once."""

from __future__ import annotations

import threading

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

import vflpriv.tradeoff.sweep as sweep_module
from vflpriv.cli import app
from vflpriv.config.sweep import ExperimentConfig
from vflpriv.engine import Meter
from vflpriv.runner.execution import build_federation, execute, pretrain_key
from vflpriv.runner.planning import plan
from vflpriv.store import cache
from vflpriv.store.records import FAILED
from vflpriv.store.sqlite import Store
from vflpriv.tradeoff.cap import cap_table

TINY_SSL = {"global_iterations": 1, "batch_size": 64, "projector_hidden": 32, "predictor_hidden": 8}
NUMBERS = ("utility", "attack_accuracy", "comm_mb", "comm_mb_pretrain", "comm_messages")


def _corrupt(kind: str, path, key: str, skeleton: list[torch.nn.Module]) -> None:
    raw = path.read_bytes()
    head, _, payload = raw.partition(b"\n")
    if kind == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    elif kind == "empty file":
        path.write_bytes(b"")
    elif kind == "not an entry":
        torch.save({"modules": []}, path)  # a torch file, but not a vflpriv entry
    elif kind == "bytes overwritten in the middle":
        middle = len(head) + 1 + len(payload) // 2
        path.write_bytes(raw[:middle] + bytes(b ^ 0xFF for b in raw[middle:middle + 64]) + raw[middle + 64:])
    elif kind == "empty module list":  # well formed and self-consistent, but holds nothing
        cache.save(key, [], Meter())
    elif kind == "missing modules":
        cache.save(key, skeleton[:1], Meter())
    elif kind == "state of another architecture":
        cache.save(key, [torch.nn.Linear(3, 4) for _ in skeleton], Meter())
    else:
        raise AssertionError(kind)


CORRUPTIONS = ["truncated", "empty file", "not an entry", "bytes overwritten in the middle", "empty module list",
               "missing modules", "state of another architecture"]


@pytest.mark.parametrize("kind", CORRUPTIONS)
def test_a_corrupt_cache_entry_is_reported_discarded_and_recomputed(kind, tiny):
    cfg = tiny(method={"name": "fedhssl", "options": TINY_SSL})
    (fresh,) = execute(plan(cfg))
    p = plan(cfg)
    key = pretrain_key(cfg, type(p.method))
    fed = build_federation(p)
    _corrupt(kind, cache.entry_path(key), key, p.method.skeleton(fed))
    with pytest.warns(UserWarning, match="discarded and recomputed"):
        (again,) = execute(plan(cfg))
    assert again.status == "ok" and "discarded and recomputed" in again.notes
    for field in NUMBERS:
        assert getattr(again, field) == getattr(fresh, field), field
    assert cache.load(key, p.method.skeleton(fed), None)  # the entry was rewritten whole


LABEL_CORRUPTIONS = {
    "not an entry": lambda path: path.write_text("{oops"),
    "a label overwritten": lambda path: path.write_bytes(path.read_bytes().replace(b"[3, 1, 2]", b"[3, 1, 7]")),
    "a label that is not a class index": lambda path: cache.write_entry(path, b'{"test": ["x"]}'),
}


@pytest.mark.parametrize("kind", sorted(LABEL_CORRUPTIONS))
def test_a_corrupt_labels_entry_is_reported_discarded_and_recomputed(kind):
    calls = []

    def compute():
        calls.append(1)
        return {"test": [3, 1, 2], "train": []}

    cache.cached_labels("k", compute)
    read = cache.cached_labels("k", compute)
    assert len(calls) == 1 and read == {"test": [3, 1, 2], "train": []}  # read, not recomputed
    LABEL_CORRUPTIONS[kind](cache.cache_dir() / "k.labels")
    with pytest.warns(UserWarning, match="discarded and recomputed"):
        again = cache.cached_labels("k", compute)
    assert len(calls) == 2 and again == {"test": [3, 1, 2], "train": []}


def test_the_prior_is_computed_once_across_processes(tiny, monkeypatch):
    """Two runs of one seed in two processes (here: the per-process memo cleared in between) fit the
    prior once: the second reads the first's accuracies from the cache."""
    import vflpriv.runner.prior as prior
    from vflpriv.runner.prior import PRIORS

    calls = []
    real = PRIORS["aux"]
    monkeypatch.setitem(PRIORS, "aux", lambda view, **k: calls.append(1) or real(view, **k))
    records = []
    for strength in (1.0, 5.0):
        monkeypatch.setattr(prior, "_PRIORS", {})
        cfg = tiny(defenses=[{"name": "iso", "strength": strength, "sweep": True}])
        records += execute(plan(cfg))
    assert len(calls) == 1
    assert records[0].prior_accuracy == records[1].prior_accuracy


def test_a_diverged_attack_fails_its_run_instead_of_scoring_protection(tiny):
    (record,) = execute(plan(tiny(attack={"options": {"lr": 1e30, "epochs": 20}, "prior": "none"})))
    assert record.status == FAILED and "non-finite" in record.error and "attack" in record.error
    assert record.utility == record.utility  # the training itself was fine and is kept


def test_a_diverged_prior_fails_its_run(tiny, monkeypatch):
    import vflpriv.runner.prior as prior

    monkeypatch.setattr(prior, "HEAD_LR", 1e30)
    monkeypatch.setattr(prior, "_PRIORS", {})
    (record,) = execute(plan(tiny()))
    assert record.status == FAILED and "prior" in record.error and "non-finite" in record.error


def test_a_failed_attack_leaves_the_other_attacks_of_the_training_scored(tiny):
    from vflpriv.config.schema import RunConfig

    good = tiny(attack={"options": {"epochs": 20}, "prior": "none"})
    bad = RunConfig.model_validate({**good.model_dump(), "attack": {"name": "mc", "options": {"lr": 1e30}, "prior": "none"}})
    records = execute(plan([good, bad]))
    assert [r.status for r in records] == ["ok", FAILED]


def _frame(statuses: dict[tuple[float, int], str]) -> pd.DataFrame:
    return pd.DataFrame([dict(method="m", dataset="d", attack="mc", defense="iso", phase="finetune", strength=s,
                              seed=k, utility=0.8, attack_accuracy=0.5, status=v, error="")
                         for (s, k), v in statuses.items()])


def test_cap_of_a_sweep_with_a_strength_failed_for_every_seed_is_incomplete():
    table = cap_table(_frame({(1, 0): "ok", (1, 1): "ok", (25, 0): "failed", (25, 1): "failed"}))
    row = table.iloc[0]
    assert row["status"] == "incomplete: strengths 25 failed" and row["cap"] != row["cap"] and row["n_seeds"] == 0


def test_cap_of_a_sweep_with_one_seed_failing_is_partial_over_the_others():
    table = cap_table(_frame({(1, 0): "ok", (1, 1): "ok", (25, 0): "ok", (25, 1): "failed"}))
    row = table.iloc[0]
    assert row["status"].startswith("partial: seeds 1 left out") and row["n_seeds"] == 1
    assert row["cap"] == pytest.approx(0.4)


def test_evaluate_reports_an_incomplete_sweep_and_writes_no_cap(tmp_path, monkeypatch):
    real = sweep_module.run_safely

    def fail_at_25(runs):
        records = real(runs)
        for record in records:
            if record.strength == 25:
                record.status, record.error = FAILED, "RuntimeError: injected"
        return records

    monkeypatch.setattr(sweep_module, "run_safely", fail_at_25)
    args = ["evaluate", "--strengths", "1,25", "--seeds", "0,1", "--jobs", "1", "--out", str(tmp_path),
            "--set", "finetune.epochs=2", "--set", "attack.options.epochs=5", "--set", "attack.prior=none",
            "--set", "model.hidden=32", "--set", "model.out_dim=16"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1 and "2 run(s) failed" in result.output
    assert "incomplete: strengths 25 failed" in result.output
    caps = pd.read_csv(tmp_path / "cap.csv")
    assert caps["status"].item() == "incomplete: strengths 25 failed" and caps["cap"].isna().all()


def test_two_sweeps_sharing_a_store_compute_each_training_once(tmp_path, monkeypatch):
    configs = ExperimentConfig.model_validate({
        "partition": {"labeled": 60, "aux": 20}, "model": {"hidden": 32, "out_dim": 16},
        "finetune": {"epochs": 3}, "attack": {"name": ["mc", "gc"], "prior": "none"},
        "strengths": [0, 1, 5, 25], "seeds": [0],
    }).runs()
    computed, lock = [], threading.Lock()
    real = sweep_module.run_safely

    def counted(runs):
        with lock:
            computed.append(runs[0].training_key())
        return real(runs)

    monkeypatch.setattr(sweep_module, "run_safely", counted)
    monkeypatch.setattr(sweep_module, "POLL_SECONDS", 0.05)
    start, frames, errors = threading.Barrier(2, timeout=60), {}, []

    def one_sweep(name, order):
        try:
            with Store(tmp_path / "shared.sqlite") as store:
                start.wait()
                frames[name] = sweep_module.sweep(order, store, checked=True)
        except BaseException as exc:  # noqa: BLE001 - a failed thread must fail the test, not hang the other
            errors.append(exc)
            start.abort()

    threads = [threading.Thread(target=one_sweep, args=("a", configs)),
               threading.Thread(target=one_sweep, args=("b", configs[::-1]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(computed) == sorted({c.training_key() for c in configs})  # each of the 4 trainings once
    a, b = frames["a"].set_index("key"), frames["b"].set_index("key")
    assert set(a["status"]) == {"ok"} and a["utility"].equals(b.loc[a.index, "utility"])
