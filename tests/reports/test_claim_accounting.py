"""Review fin17 / task acct: an epsilon rests on the count its settings state (F1: read from the record, a lowered
count with its epsilon passed), and each claim is judged once when its training is recorded (its accounting run once,
the same verdict for the notes, the record's epsilon and its accounting entries)."""

from __future__ import annotations

import importlib
import json
import math
import shutil
import sqlite3
from pathlib import Path

import pytest

import vflpriv.defenses.dp_gaussian as dp_gaussian
from vflpriv.config.sweep import ExperimentConfig
from vflpriv.defenses.embedding_dp_accounting import gaussian_epsilon
from vflpriv.reports.results import load_results
from vflpriv.runner.execution import run
from vflpriv.store.sqlite import Store, read_store
from vflpriv.tradeoff.spelling import disagreement
from vflpriv.tradeoff.sweep import sweep

BASE = {"partition": {"labeled": 60, "aux": 20}, "model": {"hidden": 32, "out_dim": 16}, "finetune": {"epochs": 1},
        "seeds": [0], "attack": {"name": "mc", "prior": "none"}}


def _run(*defenses: dict, strength: float = 0.5, **finetune):
    """The one run of ``defenses`` (the swept one at ``strength``) on BASE, with ``finetune``'s settings."""
    config = {**BASE, "finetune": {**BASE["finetune"], **finetune}, "defenses": list(defenses), "strengths": [strength]}
    return ExperimentConfig.model_validate(config).runs()[0]


def test_a_claim_is_judged_once_when_its_training_is_recorded(monkeypatch):
    """Its accountant ran up to twice (``claimed``, and ``accounting_of``'s ``claimed([d])``)."""
    calls = []
    real = dp_gaussian.spent
    monkeypatch.setattr(dp_gaussian, "spent", lambda *a, **k: calls.append(k["uses"]) or real(*a, **k))
    (record,) = run(_run({"name": "dp-gaussian", "sweep": True}))
    assert calls == [1] and record.epsilon == real(0.5, delta=1e-5, uses=1)


#: Review fin17 F1: dp-gaussian (2 epochs: count 2) and embedding-dp (fi-decoder, 2 epochs: 2 releases + 2 steps);
#: F2: fin17's composed record (dp-gaussian, label-dp and embedding-dp under mc).
F1 = {"dp-gaussian": _run({"name": "dp-gaussian", "sweep": True}, epochs=2),
      "embedding-dp": ExperimentConfig.model_validate({
          **BASE, "finetune": {"epochs": 2}, "attack": {"name": "fi-decoder", "options": {"epochs": 3}},
          "defenses": [{"name": "embedding-dp", "sweep": True}], "strengths": [0.5]}).runs()[0],
      "composed": _run({"name": "dp-gaussian", "sweep": True}, {"name": "label-dp", "strength": 2.0},
                       {"name": "embedding-dp", "strength": 0.5}, epochs=2)}


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("counts") / "results.sqlite"
    with Store(path) as store:
        sweep(list(F1.values()), store)
    return path


def _edited(written: Path, tmp_path: Path, name: str, edit) -> tuple[Path, str]:
    """A copy of the store with ``F1[name]``'s record edited by ``edit`` (its JSON dict); its key."""
    path, key = tmp_path / "results.sqlite", F1[name].key()
    shutil.copy(written, path)
    with sqlite3.connect(path) as db:
        record = json.loads(db.execute("SELECT record FROM runs WHERE key = ?", (key,)).fetchone()[0])
        edit(record)
        db.execute("UPDATE runs SET record = ? WHERE key = ?", (json.dumps(record), key))
    return path, key


def _one_use(record: dict, field: str, epsilon: float) -> None:
    """fin17's E1: the entry's count lowered to 1 and the epsilon set to what the accountant gives for it."""
    entries = json.loads(record["epsilon_accounting"])
    entries[0]["count"] = 1
    record.update(epsilon_accounting=json.dumps(entries), **{field: epsilon})


def test_the_genuine_counts_are_the_settings(written):
    frame = load_results(written)
    assert frame.attrs["damaged"] == [] and len(frame) == 3
    counts = {r.key: [e["count"] for e in json.loads(r.epsilon_accounting)] for r in read_store(written).records}
    assert counts == {F1["dp-gaussian"].key(): [2], F1["embedding-dp"].key(): [4], F1["composed"].key(): [2, None, 4]}


@pytest.mark.parametrize("name, field, epsilon", [
    ("dp-gaussian", "epsilon", dp_gaussian.spent(0.5, delta=1e-5, uses=1)),
    ("embedding-dp", "epsilon_features", gaussian_epsilon(0.25, 1, delta=1e-5))])
def test_a_count_lowered_with_its_epsilon_is_damaged(written, tmp_path, name, field, epsilon):
    """The count was read from the record: lowered with a matching epsilon, a false smaller epsilon was shown."""
    path, key = _edited(written, tmp_path, name, lambda r: _one_use(r, field, epsilon))
    frame = load_results(path)
    assert key not in set(frame["key"]) and frame.attrs["damaged"][0][0] == key
    assert "counts 1, where a run of its settings composes" in frame.attrs["damaged"][0][1]


def test_a_run_composing_another_count_than_its_settings_records_no_epsilon(monkeypatch):
    """A loop reading each row twice an epoch (its real count 2, its settings' 1) recorded the epsilon of 2 uses,
    which a read then judged against a count the settings do not give."""
    loop = importlib.import_module("vflpriv.methods.finetune")  # the package's ``finetune`` is the function
    real = loop.index_batches
    monkeypatch.setattr(loop, "index_batches", lambda *a, **k: (lambda b: (*b, *b))(real(*a, **k)))
    (record,) = run(_run({"name": "dp-gaussian", "sweep": True}))
    assert math.isnan(record.epsilon) and json.loads(record.epsilon_accounting) == [
        {"defense": 0, "revision": 1, "secret": "labels", "count": 1, "void": True}]
    assert "composed 2 mechanisms for the worst training row, where a run of its settings composes 1" in record.notes


def _entries(change):
    """An edit of the record's accounting entries (their list) and of its label epsilon and delta."""
    def edit(record):
        entries = json.loads(record["epsilon_accounting"])
        record.update(change(entries))
        record["epsilon_accounting"] = json.dumps(entries)
    return edit


#: Review fin17 F2: label-dp's claim alone (2, pure) where the record composes dp-gaussian's too.
LABEL_DP_ALONE = {"epsilon": 2.0, "epsilon_delta": 0.0}
F2 = {"an entry deleted (fin17's E5)": (_entries(lambda e: (e.pop(0), LABEL_DP_ALONE)[1]),
                                        "it names defenses [1, 2], where its settings' claiming defenses are [0, 1"),
      "an entry marked void": (_entries(lambda e: (e[0].update(void=True), LABEL_DP_ALONE)[1]), "its epsilon (2)"),
      "an entry void in another spelling": (_entries(lambda e: (e[0].update(void=1), LABEL_DP_ALONE)[1]),
                                            "is void 1")}


@pytest.mark.parametrize("edit", sorted(F2))
def test_a_composed_epsilon_without_one_claim_is_damaged(written, tmp_path, edit):
    change, why = F2[edit]
    path, key = _edited(written, tmp_path, "composed", change)
    frame = load_results(path)
    assert key not in set(frame["key"]) and frame.attrs["damaged"][0][0] == key and why in frame.attrs["damaged"][0][1]


def test_a_void_claim_leaves_its_secret_without_an_epsilon(monkeypatch, tmp_path):
    """dp-gaussian's claim void (its count not its settings'), label-dp's recorded alone: the sum of the others is no
    bound of a training whose dp-gaussian releases no bound covers. The record reads clean."""
    loop = importlib.import_module("vflpriv.methods.finetune")
    real = loop.index_batches
    monkeypatch.setattr(loop, "index_batches", lambda *a, **k: (lambda b: (*b, *b))(real(*a, **k)))
    (record,) = run(_run({"name": "dp-gaussian", "sweep": True}, {"name": "label-dp", "strength": 2.0}))
    assert math.isnan(record.epsilon) and math.isnan(record.epsilon_delta)
    assert "no labels epsilon recorded: dp-gaussian's claim is void" in record.notes
    assert [e.get("void", False) for e in json.loads(record.epsilon_accounting)] == [True, False]
    Store(tmp_path / "results.sqlite").put(record)
    assert load_results(tmp_path / "results.sqlite").attrs["damaged"] == []


def test_a_defense_claiming_nothing_has_no_entry_and_voids_nothing():
    """iso's class computes no epsilon: it had an entry (its declared secret, labels), and every such record was
    damaged on read (the entries named a defense its settings do not count as claiming)."""
    (record,) = run(_run({"name": "iso", "sweep": True}, strength=5.0))
    assert record.epsilon_accounting == "[]" and math.isnan(record.epsilon)


def test_a_claim_beside_a_defense_claiming_nothing_reads_clean(tmp_path):
    """Review acct F1: dp-gaussian + iso recorded an entry for iso (its declared secret), which the read's rule (no
    epsilon computed: no claim) did not count, so the record read as damaged, left out and rerun on resume."""
    config = _run({"name": "dp-gaussian", "sweep": True}, {"name": "iso", "strength": 5.0})
    with Store(tmp_path / "results.sqlite") as store:
        sweep([config], store)
    frame = load_results(tmp_path / "results.sqlite")
    assert frame.attrs["damaged"] == [] and list(frame["epsilon"]) == [dp_gaussian.spent(0.5, delta=1e-5, uses=1)]
    (record,) = read_store(tmp_path / "results.sqlite").records
    assert [e["defense"] for e in json.loads(record.epsilon_accounting)] == [0] and not disagreement(record, config)



def test_a_method_finetuning_by_its_own_code_is_told_by_identity_not_equality():
    """Review acct F4: ``in SHARED_ONCE`` ran the plugin's ``__eq__`` (True for all): its own finetuning was taken for
    the shared loop, and its code ran where a claim is judged."""
    from vflpriv.config.registry import METHODS
    from vflpriv.methods.splitnn import SplitNN
    from vflpriv.runner import accountants

    class Equal:
        __hash__ = None

        def __eq__(self, other):
            return True

    METHODS.register("acct-equal", type("Eq", (SplitNN,), {"finetune": Equal()}))
    try:
        assert "finetunes by its own code (Eq.finetune)" in accountants._finetuned_by("acct-equal")
    finally:
        METHODS._extra.pop("acct-equal")
        accountants._finetuned_by.cache_clear()
