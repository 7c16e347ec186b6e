"""A store holding one run's settings under two keys (a component revised between two evaluates: the old records
stay beside the recomputed ones) gave ``vflpriv table`` a traceback ("seed(s) 0 appear more than once among the
records of one leakage test"); the table keeps the run the current code keys and says what it left out."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from vflpriv.cli import app
import vflpriv.config.keys as keys_module
from vflpriv.config.sweep import ExperimentConfig
from vflpriv.reports.results import current_records, load_results
from vflpriv.store.records import RunRecord
from vflpriv.store.sqlite import Store


def _record(run, key: str, accuracy: float) -> RunRecord:
    config = json.dumps(run.as_read().model_dump(mode="json"), sort_keys=True)
    return RunRecord(key=key, training_key=run.training_key(), method=run.method.name, dataset=run.dataset.name,
                     attack=run.attack.name, defense="iso", adversary="1",
                     phase="finetune", strength=float(run.swept.strength or 0.0), strength_axis="lambda",
                     strength_stronger="higher", strength_identity=0.0, num_classes=10, seed=run.seed, utility=0.8,
                     attack_accuracy=accuracy, prior_accuracy=0.1, leakage=accuracy - 0.1, config=config)


def _runs():
    return ExperimentConfig.model_validate({"strengths": [1.0], "seeds": [0, 1]}).runs()


def test_the_current_code_s_record_of_a_run_is_kept_and_the_earlier_one_named():
    first, second = _runs()
    old = _record(first, "0" * 20, 0.9)  # the same settings, keyed by an earlier revision of a component
    records = [old, _record(first, first.key(), 0.5), _record(second, second.key(), 0.5)]
    kept, superseded = current_records(records)
    assert sorted(r.key for r in kept) == sorted([first.key(), second.key()])
    assert [k for k, _ in superseded] == [old.key] and "kept: the current code's" in superseded[0][1]


@pytest.fixture
def earlier(monkeypatch):
    """iso as revised twice (its keys' mark, ``keys.code_mark``: assigning the class's ``revision`` would make it a
    patched class): the key the code of an earlier ``revision`` gave a run (a read checks a record's key against its
    settings, review hunt3 P1, so a store's earlier records carry the keys their code made)."""
    def key(run, revision: int) -> str:
        with monkeypatch.context() as patch:
            patch.setattr(keys_module, "_revision", lambda registry, name: revision if name == "iso" else 0)
            return run.key()
    monkeypatch.setattr(keys_module, "_revision", lambda registry, name: 2 if name == "iso" else 0)
    return key


def test_vflpriv_table_reads_a_store_of_two_revisions_of_one_run_without_counting_a_seed_twice(tmp_path, earlier):
    first, second = _runs()
    store = Store(tmp_path / "results.sqlite")
    for record in (_record(first, earlier(first, 0), 0.9), _record(first, first.key(), 0.5),
                   _record(second, second.key(), 0.5)):
        store.put(record)
    assert len(load_results(tmp_path / "results.sqlite")) == 2
    result = CliRunner().invoke(app, ["table", str(tmp_path / "results.sqlite"), "--out", str(tmp_path / "t")])
    assert result.exit_code == 0, result.output
    assert "1 record(s) of a run stored under another key left out" in result.output
    assert "kept: the current code's" in result.output


def test_a_run_recorded_on_another_device_is_the_same_run_and_seeds_sharing_settings_stay_apart():
    """Review final14 F1: the settings' text held ``device``, so an earlier revision's record run on cuda stood beside
    its recompute on the CPU; records whose settings are equal but whose seeds differ (hand-made) stay apart."""
    first, _ = _runs()
    old = _record(first, "0" * 20, 0.9)
    old = RunRecord(**{**old.__dict__, "config": json.dumps({**json.loads(old.config), "device": "cuda"})})
    kept, superseded = current_records([old, _record(first, first.key(), 0.5)])
    assert [r.key for r in kept] == [first.key()] and [k for k, _ in superseded] == [old.key]
    twin = RunRecord(**{**old.__dict__, "key": "1" * 20, "seed": 1})
    assert len(current_records([old, twin])[0]) == 2


def test_a_record_written_before_a_setting_existed_is_grouped_with_its_run():
    """Review final14 F2: an earlier code's record without ``finetune.top_depth`` (added since, with a default) was a
    variant of its own (``finetune.top_depth=unset``) beside its run's recompute."""
    first, _ = _runs()
    old = _record(first, "0" * 20, 0.9)
    settings = json.loads(old.config)
    del settings["finetune"]["top_depth"]
    old = RunRecord(**{**old.__dict__, "config": json.dumps(settings, sort_keys=True)})
    kept, superseded = current_records([old, _record(first, first.key(), 0.5)])
    assert [r.key for r in kept] == [first.key()] and [k for k, _ in superseded] == [old.key]


def test_where_no_record_is_the_current_code_s_the_one_written_last_is_kept_and_the_warning_says_so(tmp_path, earlier):
    """Review final14 F3: "kept: the first" was the lowest key (the store reads in key order), whatever its age, and
    the warning said the current runs were kept."""
    first, second = _runs()
    store = Store(tmp_path / "results.sqlite")
    low, last = sorted([earlier(first, 0), earlier(first, 1)])
    for record in (_record(first, low, 0.9), _record(first, last, 0.5), _record(second, second.key(), 0.5)):
        store.put(record)  # both of seed 0 from earlier code, the higher key written last
    frame = load_results(tmp_path / "results.sqlite")
    assert sorted(frame["key"]) == sorted([last, second.key()])
    result = CliRunner().invoke(app, ["table", str(tmp_path / "results.sqlite"), "--out", str(tmp_path / "t")])
    assert result.exit_code == 0, result.output
    assert "(1 beside the one written last, where none is the current code's;" in result.output


def _targeted(target: float, seeds: list[int]):
    return ExperimentConfig.model_validate({"defenses": [{"name": "dp-gaussian", "sweep": True, "options": {
        "target_epsilon": target}}], "seeds": seeds}).runs()


def _solved(run, key: str, accuracy: float, sigma: float) -> RunRecord:
    """A dp-gaussian record at ``options.target_epsilon``: its strength is the sigma the code solved."""
    return RunRecord(**{**_record(run, key, accuracy).__dict__, "defense": "dp-gaussian", "strength": sigma,
                        "strength_axis": "sigma"})


def test_a_run_whose_strength_an_option_sets_is_one_run_whatever_sigma_each_revision_solved():
    """Review l6 L3: an earlier revision's record, which solved another sigma for the same settings, was kept beside
    its recompute as a strength point of its own; another target stays another run, whatever sigma it solved."""
    first, second = _targeted(2.0, [0, 1])
    old = _solved(first, "0" * 20, 0.9, 12.0)
    kept, superseded = current_records([old, _solved(first, first.key(), 0.5, 19.3),
                                        _solved(second, second.key(), 0.5, 19.3)])
    assert sorted(r.key for r in kept) == sorted([first.key(), second.key()])
    assert [k for k, _ in superseded] == [old.key]
    other = _targeted(3.0, [0])[0]
    kept, superseded = current_records([_solved(first, first.key(), 0.5, 19.3), _solved(other, other.key(), 0.5, 19.3)])
    assert len(kept) == 2 and not superseded


def test_records_whose_settings_the_current_code_cannot_read_say_so_and_not_that_other_code_wrote_them(tmp_path):
    """Review l6 L2: a retired option (or no settings recorded, hand-made) left out beside its twin was said to be
    "written by other code of its components" and kept "none being the current code's"; neither can be told."""
    first, second = _runs()
    retired = json.loads(_record(first, "f" * 20, 0.5).config)
    retired["model"]["retired_option"] = 1
    records = [RunRecord(**{**_record(first, key * 20, 0.5).__dict__, "config": json.dumps(retired)}) for key in "fe"]
    handmade = [RunRecord(**{**_record(second, key * 20, 0.5).__dict__, "config": ""}) for key in "ab"]
    store = Store(tmp_path / "results.sqlite")
    for record in records + handmade:
        store.put(record)
    kept, superseded = current_records(records + handmade)
    assert sorted(r.key[0] for r in kept) == ["b", "e"]
    assert all(why.endswith("(kept: the one written last; the current code cannot read their settings)")
               and "other code" not in why for _, why in superseded)
    result = CliRunner().invoke(app, ["table", str(tmp_path / "results.sqlite"), "--out", str(tmp_path / "t")])
    assert result.exit_code == 0, result.output
    assert "(2 beside the one written last, of settings the current code cannot read;" in result.output
