"""A killed sweep resumes: done runs are skipped, failed ones retried, nothing duplicated."""

import vflpriv.tradeoff.sweep as sweep_module
from vflpriv.config import ExperimentConfig
from vflpriv.store import Store


def _experiment():
    return ExperimentConfig.model_validate({
        "partition": {"labeled": 60, "aux": 20}, "model": {"hidden": 32, "out_dim": 16},
        "finetune": {"epochs": 1}, "attack": {"options": {"epochs": 5}, "prior": "none"},
        "strengths": [0, 5], "seeds": [0],
    })


def test_resume_skips_done_runs(tmp_path, monkeypatch):
    configs = _experiment().runs()
    calls = []
    real = sweep_module.run_safely
    monkeypatch.setattr(sweep_module, "run_safely", lambda c: calls.append(c.key()) or real(c))
    with Store(tmp_path / "r.sqlite") as store:
        sweep_module.sweep(configs[:1], store)  # the sweep "was killed" after its first run
    with Store(tmp_path / "r.sqlite") as store:
        frame = sweep_module.sweep(configs, store)
        assert len(store.all()) == 2
    assert calls == [configs[0].key(), configs[1].key()]
    assert list(frame["strength"]) == [0.0, 5.0] and set(frame["status"]) == {"ok"}


def test_forgotten_runs_are_recomputed_and_others_kept(tmp_path, monkeypatch):
    configs = _experiment().runs()
    with Store(tmp_path / "r.sqlite") as store:
        sweep_module.sweep(configs, store)
        calls = []
        real = sweep_module.run_safely
        monkeypatch.setattr(sweep_module, "run_safely", lambda c: calls.append(c.key()) or real(c))
        assert store.forget([configs[1].key(), "no-such-key"]) == 1
        sweep_module.sweep(configs, store)
        assert calls == [configs[1].key()] and len(store.all()) == 2


def test_failed_run_is_recorded_and_retried(tmp_path, monkeypatch):
    configs = _experiment().runs()[:1]

    def boom(plan):
        raise RuntimeError("diverged")

    monkeypatch.setattr(sweep_module, "execute", boom)
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
