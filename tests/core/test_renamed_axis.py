"""Review eps2 G2: a record stored while grad-perturb's axis read 'epsilon' (a noise parameter, not a claim) reads with
the axis name it has now, so an old store prints no 'epsilon=1' and its seeds join the new ones in one row."""

import json
import sqlite3

import pandas as pd

from vflpriv.config.sweep import ExperimentConfig
from vflpriv.store.records import RunRecord
from vflpriv.store.sqlite import Store, read_store
from vflpriv.tradeoff.cap import strength_summary
from vflpriv.tradeoff.sweep import sweep


def test_a_stored_grad_perturb_record_of_the_old_axis_name_reads_as_laplace_eps(tmp_path):
    path = tmp_path / "r.sqlite"
    runs = ExperimentConfig.model_validate({
        "partition": {"labeled": 60, "aux": 20}, "model": {"hidden": 32, "out_dim": 16}, "finetune": {"epochs": 1},
        "attack": {"name": "mc", "prior": "none"}, "defenses": [{"name": "grad-perturb", "sweep": True}],
        "strengths": [1.0], "seeds": [0, 1]}).runs()
    with Store(path) as store:
        sweep(runs, store)
    with sqlite3.connect(path) as db:  # seed 0 as the code before review eps F6 wrote it
        key, text = db.execute("SELECT key, record FROM runs WHERE json_extract(record, '$.seed') = 0").fetchone()
        db.execute("UPDATE runs SET record = ? WHERE key = ?", (json.dumps({**json.loads(text),
                                                                            "strength_axis": "epsilon"}), key))
    records = read_store(path).records
    assert {r.strength_axis for r in records} == {"laplace_eps"}
    summary = strength_summary(pd.DataFrame([r.to_dict() for r in records], columns=RunRecord.columns()))
    assert list(summary["strength_axis"]) == ["laplace_eps"] and list(summary["n_seeds"]) == [2]
