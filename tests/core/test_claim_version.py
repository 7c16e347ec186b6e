"""Review eps F3: a stored epsilon decided by earlier claim rules (``RunRecord.claim_version``) is never shown (read as
none, the note says why) and never resumed (the sweep deletes and recomputes it); an old store still opens."""

import json
import math
import sqlite3

import vflpriv.tradeoff.sweep as sweep_module
from vflpriv.config.sweep import ExperimentConfig
from vflpriv.store.records import CLAIM_VERSION
from vflpriv.store.sqlite import Store, read_store


def _configs():
    return ExperimentConfig.model_validate({
        "partition": {"labeled": 60, "aux": 20}, "model": {"hidden": 32, "out_dim": 16},
        "finetune": {"epochs": 1}, "attack": {"name": "mc", "prior": "none"},
        "defenses": [{"name": "label-dp", "sweep": True}], "strengths": [2.0], "seeds": [0]}).runs()


def _written_by_older_code(path):
    """The stored record as vflpriv wrote it before the field: no claim_version."""
    with sqlite3.connect(path) as db:
        key, text = db.execute("SELECT key, record FROM runs").fetchone()
        data = json.loads(text)
        del data["claim_version"]
        db.execute("UPDATE runs SET record = ? WHERE key = ?", (json.dumps(data), key))


def test_an_epsilon_of_earlier_claim_rules_is_withheld_on_read_and_recomputed_on_resume(tmp_path, monkeypatch):
    path = tmp_path / "r.sqlite"
    with Store(path) as store:
        sweep_module.sweep(_configs(), store)
    (fresh,) = read_store(path).records
    assert fresh.epsilon == 2.0 and fresh.claim_version == CLAIM_VERSION
    _written_by_older_code(path)
    (old,) = read_store(path).records
    assert math.isnan(old.epsilon) and math.isnan(old.epsilon_delta) and "epsilon withheld" in old.notes
    assert old.utility == fresh.utility
    calls = []
    real = sweep_module.run_safely
    monkeypatch.setattr(sweep_module, "run_safely", lambda runs: calls.append(runs) or real(runs))
    with Store(path) as store:
        sweep_module.sweep(_configs(), store)
    (again,) = read_store(path).records
    assert len(calls) == 1 and again.epsilon == 2.0 and "withheld" not in again.notes
