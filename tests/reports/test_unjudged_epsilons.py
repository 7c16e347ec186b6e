"""Review acct F2, F3: a record of a plugin method or beside a plugin defense that cannot be imported at read was not
checked at all (an edited epsilon shown); an edit un-voiding a claim its settings void (embedding-dp's
``private_bottom=false``) showed a false epsilon. Checked where it can be, withheld where it cannot."""

from __future__ import annotations

import json
import math
import shutil
import sqlite3
from pathlib import Path

import pytest

from vflpriv.config.registry import DEFENSES, METHODS
from vflpriv.config.sweep import ExperimentConfig
from vflpriv.defenses.embedding_dp_accounting import gaussian_epsilon
from vflpriv.defenses.iso import IsotropicNoise
from vflpriv.methods.splitnn import SplitNN
from vflpriv.reports.results import load_results
from vflpriv.store.sqlite import Store
from vflpriv.tradeoff.sweep import sweep

BASE = {"partition": {"labeled": 60, "aux": 20}, "model": {"hidden": 32, "out_dim": 16}, "finetune": {"epochs": 1},
        "seeds": [0], "attack": {"name": "mc", "prior": "none"}, "strengths": [0.5]}
DP = {"name": "dp-gaussian", "sweep": True}
#: Each case: its settings and the plugins a run of them needs (gone at read).
CASES = {"method": ({**BASE, "method": {"name": "acct-plug-method"}, "defenses": [DP]}, ("acct-plug-method",), ()),
         "defense": ({**BASE, "defenses": [DP, {"name": "acct-plug-iso", "strength": 1.0}]}, (), ("acct-plug-iso",)),
         "no private bottom": ({**BASE, "attack": {"name": "fi-decoder", "options": {"epochs": 3}},
                                "defenses": [{**DP, "name": "embedding-dp", "options": {"private_bottom": False}}]},
                               (), ()),
         "vflhlp": ({**BASE, "method": {"name": "vflhlp"}, "defenses": [DP, {"name": "label-dp", "strength": 2.0}]},
                    (), ())}


def _store(tmp_path: Path, case: str) -> tuple[Path, str]:
    """The store of one run of ``CASES[case]``, its plugins unregistered after; the run's key."""
    config, methods, defenses = CASES[case]
    for name in methods:
        METHODS.register(name, type("Plug", (SplitNN,), {}))
    for name in defenses:
        DEFENSES.register(name, type("PlugIso", (IsotropicNoise,), {}))
    try:
        (run,) = ExperimentConfig.model_validate(config).runs()
        key = run.key()  # a plugin's code is keyed: while it is registered
        with Store(tmp_path / "results.sqlite") as store:
            sweep([run], store)
    finally:
        for registry, names in ((METHODS, methods), (DEFENSES, defenses)):
            for name in names:
                registry._extra.pop(name)
    return tmp_path / "results.sqlite", key


def _edit(path: Path, key: str, edit) -> None:
    with sqlite3.connect(path) as db:
        record = json.loads(db.execute("SELECT record FROM runs WHERE key = ?", (key,)).fetchone()[0])
        edit(record)
        db.execute("UPDATE runs SET record = ? WHERE key = ?", (json.dumps(record), key))


@pytest.mark.parametrize("case", ["method", "defense"])
def test_a_record_of_a_plugin_gone_at_read_is_checked_and_its_epsilon_withheld(tmp_path, case):
    """The edited epsilon (1.0) was shown, unchecked; the genuine one is withheld (an unknown defense may claim it, an
    unknown method's finetuning may void it), with the warning, not shown unjudged."""
    path, key = _store(tmp_path, case)
    frame = load_results(path)
    assert frame.attrs["damaged"] == [] and math.isnan(frame["epsilon"].iloc[0])
    assert frame.attrs["withheld"][0][0] == key and "epsilon withheld" in frame.attrs["withheld"][0][1]
    edited = tmp_path / "edited.sqlite"
    shutil.copy(path, edited)
    _edit(edited, key, lambda r: r.update(epsilon=1.0))
    with pytest.raises(Exception, match="is damaged"):
        load_results(edited)


def test_an_entry_un_voided_where_the_settings_void_it_is_damaged(tmp_path):
    """embedding-dp without DP-SGD: its record has no feature epsilon ("void": true); the void popped and the epsilon of
    its count written read clean (the reviewer's 68.6 shown)."""
    path, key = _store(tmp_path, "no private bottom")

    def unvoid(record):
        entries = json.loads(record["epsilon_accounting"])
        assert entries[0].pop("void") is True
        record.update(epsilon_accounting=json.dumps(entries), epsilon_features=gaussian_epsilon(0.25, 1, delta=1e-5),
                      epsilon_features_delta=1e-5)

    assert load_results(path).attrs["damaged"] == []
    _edit(path, key, unvoid)
    with pytest.raises(Exception, match="where its settings void its claim: options.private_bottom=false"):
        load_results(path)


def test_a_claim_un_voided_beside_a_method_reading_labels_outside_it_is_damaged(tmp_path):
    """VFLHLP reads the clean labels outside dp-gaussian's loop: its record has no label epsilon; dp-gaussian's entry
    un-voided and the sum with label-dp's written read clean (the reviewer's 43.6 shown)."""
    from vflpriv.defenses.dp_gaussian import spent

    path, key = _store(tmp_path, "vflhlp")

    def unvoid(record):
        entries = json.loads(record["epsilon_accounting"])
        assert entries[0].pop("void") is True and math.isnan(record["epsilon"] or math.nan)
        record.update(epsilon_accounting=json.dumps(entries), epsilon=spent(0.5, delta=1e-5, uses=1) + 2.0,
                      epsilon_delta=1e-5)

    assert load_results(path).attrs["damaged"] == []
    _edit(path, key, unvoid)
    with pytest.raises(Exception, match="where its settings void its claim"):
        load_results(path)
