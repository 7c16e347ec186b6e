"""A killed sweep resumes: done runs are skipped, failed ones retried, nothing duplicated; one training
serves every attack of a (strength, seed); records are strict JSON."""

import json
import sqlite3

import pytest

import vflpriv.tradeoff.sweep as sweep_module
from vflpriv.config.sweep import ExperimentConfig
from vflpriv.store.sqlite import Store


def _experiment(attacks="mc", strengths=(0, 5)):
    return ExperimentConfig.model_validate({
        "partition": {"labeled": 60, "aux": 20}, "model": {"hidden": 32, "out_dim": 16},
        "finetune": {"epochs": 1}, "attack": {"name": attacks, "prior": "none"},
        "strengths": list(strengths), "seeds": [0],
    })


@pytest.fixture
def trained(monkeypatch):
    """The training keys run_safely was called with, and the run keys of each call."""
    calls = []
    real = sweep_module.run_safely
    monkeypatch.setattr(sweep_module, "run_safely", lambda runs: calls.append([r.key() for r in runs]) or real(runs))
    return calls


def test_resume_skips_done_runs(tmp_path, trained):
    configs = _experiment().runs()
    with Store(tmp_path / "r.sqlite") as store:
        sweep_module.sweep(configs[:1], store)  # the sweep "was killed" after its first run
    with Store(tmp_path / "r.sqlite") as store:
        frame = sweep_module.sweep(configs, store)
        assert len(store.all()) == 2
    assert trained == [[configs[0].key()], [configs[1].key()]]
    assert list(frame["strength"]) == [0.0, 5.0] and set(frame["status"]) == {"ok"}


def test_several_attacks_train_once_and_an_added_attack_computes_only_its_records(tmp_path, trained):
    two = _experiment(["mc", "gc"], strengths=(5,)).runs()
    with Store(tmp_path / "r.sqlite") as store:
        frame = sweep_module.sweep(two, store)
        assert trained == [[c.key() for c in two]]  # one training for both attacks
        assert frame["training_key"].nunique() == 1 and set(frame["status"]) == {"ok"}
    wider = _experiment(["mc", "gc"], strengths=(5, 25)).runs()
    with Store(tmp_path / "r.sqlite") as store:
        sweep_module.sweep(wider, store)
    assert trained[1:] == [[c.key() for c in wider if c.swept.strength == 25]]
    done = _experiment(["mc", "gc"], strengths=(5,)).runs()
    other_options = _experiment("mc", strengths=(5,)).model_copy(deep=True)
    other_options.attack.options = {"epochs": 3}
    with Store(tmp_path / "r.sqlite") as store:
        sweep_module.sweep(done + other_options.runs(), store)
    assert trained[2:] == [[other_options.runs()[0].key()]]  # the new attack only, on one more training


def test_forgotten_runs_are_recomputed_and_others_kept(tmp_path, trained):
    configs = _experiment().runs()
    with Store(tmp_path / "r.sqlite") as store:
        sweep_module.sweep(configs, store)
        trained.clear()
        assert store.forget([configs[1].key(), "no-such-key"]) == 1
        sweep_module.sweep(configs, store)
        assert trained == [[configs[1].key()]] and len(store.all()) == 2


def test_failed_run_is_recorded_and_retried(tmp_path, monkeypatch):
    configs = _experiment().runs()[:1]

    def boom(plan):
        raise RuntimeError("diverged")

    monkeypatch.setattr("vflpriv.runner.execution.execute", boom)
    with Store(tmp_path / "r.sqlite") as store:
        frame = sweep_module.sweep(configs, store)
        assert frame["status"].tolist() == ["failed"] and "diverged" in frame["error"].item()
        assert not store.done(configs[0].key())
    monkeypatch.undo()
    with Store(tmp_path / "r.sqlite") as store:
        assert sweep_module.sweep(configs, store)["status"].tolist() == ["ok"]


def test_parallel_sweep_gives_the_sequential_numbers(tmp_path):
    configs = _experiment().runs()
    with Store(tmp_path / "seq.sqlite") as store:
        sequential = sweep_module.sweep(configs, store, jobs=1)
    with Store(tmp_path / "par.sqlite") as store:
        parallel = sweep_module.sweep(configs, store, jobs=2, backend="loky")
    cols = ["key", "utility", "attack_accuracy", "comm_mb"]
    assert sequential[cols].equals(parallel[cols])


def test_a_lone_sweep_with_a_worker_reads_none_of_its_own_runs_from_the_store(tmp_path, monkeypatch):
    """Review hunt3 P5: the worker's training, read back from the store while its commit was under way, was said to be
    '1 read from the store, computed meanwhile' (``on_read``: by another sweep) though no other sweep ran, and its
    records came after the sweep returned (after the progress line's last count)."""
    import threading
    import time

    put = Store.put_many

    def slowly(self, records):  # the worker's commit waits for the disk after writing
        when = put(self, records)
        if threading.current_thread() is not threading.main_thread():
            time.sleep(0.5)
        return when

    monkeypatch.setattr(Store, "put_many", slowly)
    read, done = [], []
    with Store(tmp_path / "r.sqlite") as store:  # the pool of the test above serves (loky's reusable executor)
        sweep_module.sweep(_experiment().runs(), store, jobs=2, backend="loky", on_read=read.extend,
                           on_done=done.extend)
        assert read == [] and len(done) == 2


def test_records_are_strict_json_that_sqlite_reads(tmp_path):
    configs = _experiment().runs()[:1]
    with Store(tmp_path / "r.sqlite") as store:
        sweep_module.sweep(configs, store)  # prior none: prior_accuracy and leakage are NaN
    db = sqlite3.connect(tmp_path / "r.sqlite")
    (text,) = db.execute("SELECT record FROM runs").fetchone()
    data = json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in a stored record"))
    assert data["prior_accuracy"] is None
    (utility, prior) = db.execute("SELECT json_extract(record, '$.utility'), json_extract(record, '$.prior_accuracy') "
                                  "FROM runs").fetchone()
    assert 0 < utility <= 1 and prior is None
    with Store(tmp_path / "r.sqlite") as store:
        record = store.get(configs[0].key())
    assert record.prior_accuracy != record.prior_accuracy  # NaN again when read back


def test_the_first_training_of_each_pretraining_runs_first():
    """Long trainings start early and two workers do not start on one pretraining at once."""
    runs = [r for method in ("splitnn", "fedhssl") for r in ExperimentConfig.model_validate({
        "method": {"name": method}, "strengths": [1, 5], "seeds": [0, 1]}).runs()]
    groups = sweep_module.trainings(runs)
    order = [groups[k][0] for k in sweep_module.schedule(groups)]
    assert [(r.method.name, r.seed) for r in order[:2]] == [("fedhssl", 0), ("fedhssl", 1)]
    assert {r.swept.strength for r in order[:2]} == {1.0}
    assert sorted(order, key=runs.index) == runs and len(order) == len(groups) == 8


def test_one_training_per_cae_autoencoder_starts_first_and_its_other_users_last():
    """CAE's autoencoder (one per strength, shared by dcae) is a shared state like a pretraining: two workers never
    start on one autoencoder at once, and the trainings that reuse it come after those that need none."""
    def runs_of(defense):
        return ExperimentConfig.model_validate({"method": {"name": "splitnn"}, "defenses": [{"name": defense, "sweep": True}],
                                                "strengths": [0.1, 0.5], "seeds": [0, 1]}).runs()

    runs = runs_of("cae") + runs_of("iso") + runs_of("dcae")
    groups = sweep_module.trainings(runs)
    order = [groups[k][0] for k in sweep_module.schedule(groups)]
    names = [(r.swept.name, r.swept.strength, r.seed) for r in order]
    assert names[:2] == [("cae", 0.1, 0), ("cae", 0.5, 0)]
    assert [n[0] for n in names[2:6]] == ["iso"] * 4 and {n[0] for n in names[6:]} == {"cae", "dcae"}
    assert sorted(order, key=runs.index) == runs


def test_the_progress_estimate_sees_each_trainings_kind_and_which_build_a_shared_state():
    runs = [r for name in ("cae", "iso") for r in ExperimentConfig.model_validate({
        "method": {"name": "splitnn"}, "defenses": [{"name": name, "sweep": True}], "strengths": [0.1, 0.5],
        "seeds": [0, 1], "attack": {"name": ["mc", "gc"]}}).runs()]
    groups = sweep_module.trainings(runs)
    items = sweep_module.planned_work(groups, sweep_module.schedule(groups))
    assert [(i.kind, i.builds) for i in items] == [("splitnn|cae|", True)] * 2 + [("splitnn|iso|", False)] * 4 + [
        ("splitnn|cae|", False)] * 2  # one autoencoder per strength, built by its first training
    assert items[0].label == "splitnn cae 0.1 seed 0" and all(i.attacks == ("mc", "gc") for i in items)
    assert [i.key for i in items] == sweep_module.schedule(groups)


def test_one_training_of_each_kind_then_those_computing_more_runs_first():
    """One training of each kind first (the progress estimate prices each kind by its first), then an audit's
    trainings with every passive attack (several runs) before those of an acting attack or the canaries' control (one
    run): a parallel sweep ends on short trainings."""
    passive = ExperimentConfig.model_validate({"method": {"name": "splitnn"}, "strengths": [1, 5], "seeds": [0],
                                               "attack": {"name": ["mc", "gc"]}}).runs()
    active = ExperimentConfig.model_validate({"method": {"name": "splitnn"}, "strengths": [1, 5], "seeds": [0],
                                              "attack": {"name": "mc-active"}}).runs()
    runs = active + passive
    groups = sweep_module.trainings(runs)
    order = [groups[k] for k in sweep_module.schedule(groups)]
    assert [len(g) for g in order] == [2, 1, 2, 1]  # the acting attack's first training is its kind's sample
    assert [g[0].swept.strength for g in order] == [1.0, 1.0, 5.0, 5.0]  # ties keep the grid order



def test_sweeps_creating_one_store_at_once_all_open_it(tmp_path):
    """Opening checks the file and creates the schema in one transaction: a sweep that opens a store another
    is creating never sees it half-initialised (tables without the application id) and refuses it."""
    import threading

    failures = []

    def open_at(path, start):
        start.wait()
        try:
            Store(path).close()
        except Exception as exc:  # noqa: BLE001 - reported by the test
            failures.append(f"{type(exc).__name__}: {exc}")

    for attempt in range(40):
        start = threading.Barrier(4, timeout=30)
        threads = [threading.Thread(target=open_at, args=(tmp_path / f"{attempt}.sqlite", start)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert failures == []


@pytest.mark.parametrize("damage", ["{not json", '{"key": "k"}', "[1, 2]", "the record of another run"])
def test_a_damaged_record_is_deleted_recomputed_and_said(tmp_path, trained, damage):
    configs = _experiment().runs()
    with Store(tmp_path / "r.sqlite") as store:
        sweep_module.sweep(configs, store)
        first = store.get(configs[0].key())
        other = store.get(configs[1].key()).to_json()
    text = other if damage == "the record of another run" else damage
    with sqlite3.connect(tmp_path / "r.sqlite") as db:
        db.execute("UPDATE runs SET record = ? WHERE key = ?", (text, configs[0].key()))
    trained.clear()
    notes = []
    with Store(tmp_path / "r.sqlite") as store:
        with pytest.raises(ValueError, match=f"the stored record of run {configs[0].key()} is damaged"):
            store.get(configs[0].key())
        frame = sweep_module.sweep(configs, store, on_note=notes.append)
        again = store.get(configs[0].key())
    assert trained == [[configs[0].key()]]  # only the damaged run's training, once
    assert len(notes) == 1 and notes[0].startswith("1 damaged record(s) in the store deleted and recomputed")
    assert set(frame["status"]) == {"ok"} and again.utility == first.utility  # the same numbers again


def test_two_trainings_that_differ_by_a_swept_setting_are_named_apart():
    """Review hunt3 P5: the progress line named two trainings of a grid's learning rates alike; what the label names
    already (the seed, the strength) is not named again."""
    from vflpriv.tradeoff.variants import told_apart

    runs = [r for lr in (0.001, 0.01) for r in ExperimentConfig.model_validate({
        "method": {"name": "splitnn"}, "strengths": [1, 5], "seeds": [0, 1], "finetune": {"lr": lr}}).runs()]
    groups = sweep_module.trainings(runs)
    apart = told_apart(groups)
    named = {sweep_module.describe(runs, apart[key]) for key, runs in groups.items()}
    assert len(named) == len(groups) == 8
    assert "splitnn (finetune.lr=0.01), iso 5, seed 1: training, 1 attack and the prior" in named
    labels = {i.label for i in sweep_module.planned_work(groups, list(groups), apart)}
    assert len(labels) == 8 and "splitnn (finetune.lr=0.001) iso 1 seed 0" in labels
    assert set(told_apart(sweep_module.trainings(runs[:4])).values()) == {""}  # one learning rate: nothing more said
    clipped = {"name": "dp-gaussian", "sweep": True, "options": {"clip": 2.0}}
    other = ExperimentConfig.model_validate({"method": {"name": "splitnn"}, "strengths": [1], "seeds": [0],
                                             "defenses": [clipped]}).runs()
    assert set(told_apart(sweep_module.trainings(runs[:4] + other)).values()) == {""}  # its name tells it apart
