"""A training another sweep stores after this sweep's start-up check is read only where its records pass that check's
tests (data fingerprint, canary key, claim rules), plain trainings as secure-noise ones; else it is recomputed."""

from __future__ import annotations

import dataclasses
import json
import re
import sqlite3
import time

import pytest

from vflpriv.common.errors import ConfigError
from vflpriv.store.sqlite import Store
from vflpriv.tradeoff.gap import DAMAGED, KINDS, OTHER_DATA, OTHER_KEY, STALE, GapCheck
from vflpriv.tradeoff.sweep import drop_damaged, sweep


def _configs(tiny, secure):
    defense = {"name": "label-dp", "strength": 2.0, "options": {"secure_noise": True} if secure else {}}
    fast = {"model": {"hidden": 16, "out_dim": 8}, "finetune": {"epochs": 1, "batch_size": 64}, "defenses": [defense]}
    return [tiny(attack={"name": name, "prior": "none", "options": options}, **fast)
            for name, options in (("mc", {"epochs": 1}), ("similarity", {}))]


def _b_stores_it_in_the_gap(configs, path, monkeypatch, mark, *, caller_checks, overwrite=False, notes=None):
    """Sweep A over an empty store while sweep B runs the training whole right after A's start-up check, its records
    re-put through ``mark`` (as another process's write): (A's frame, the records held, B's records)."""
    import vflpriv.tradeoff.sweep as sweep_module

    by_b = {}

    def b_runs_it():
        with Store(path) as b:
            sweep(configs, b)
            b.put_many([mark(r) for r in b.all()])
            by_b.update((r.key, r) for r in b.all())

    with Store(path) as a:
        if caller_checks:  # as evaluate does: the check, then the sweep told when the check began
            since = time.time()
            redo = drop_damaged(a, configs, on_note=None)
            b_runs_it()
            frame = sweep(configs, a, checked=True, redo=redo, since=since, replace_other_data=overwrite,
                          on_note=notes.append if notes is not None else None)
        else:
            def then_b_runs_it(*args, **kwargs):
                monkeypatch.setattr(sweep_module, "drop_damaged", check)  # B's own check is the plain one
                redo = check(*args, **kwargs)
                b_runs_it()
                return redo

            check = sweep_module.drop_damaged
            monkeypatch.setattr(sweep_module, "drop_damaged", then_b_runs_it)
            frame = sweep(configs, a, replace_other_data=overwrite)
        return frame, {r.key: r for r in a.all()}, by_b


CASES = [(field, value, secure) for field, value in (("data_fingerprint", "f" * 16), ("canary_key", "abcd" * 4),
                                                     ("claim_version", 4)) for secure in (False, True)]


OTHER = {"data_fingerprint": "computed on other data", "canary_key": "another canary key"}


@pytest.mark.parametrize(("field", "value", "secure"), CASES)
def test_a_training_stored_in_the_gap_that_fails_the_start_up_check_is_recomputed(tiny, tmp_path, monkeypatch, field,
                                                                                  value, secure):
    configs = _configs(tiny, secure)
    frame, held, by_b = _b_stores_it_in_the_gap(configs, tmp_path / "results.sqlite", monkeypatch,
                                                lambda r: dataclasses.replace(r, **{field: value}), caller_checks=True,
                                                overwrite=field in OTHER)
    assert all(getattr(r, field) == value for r in by_b.values())
    assert all(getattr(r, field) != value for r in held.values())  # A's own training replaced B's
    assert list(frame[field]) == [getattr(held[c.key()], field) for c in configs]


@pytest.mark.parametrize(("field", "value"), [(field, value) for field, value, secure in CASES[:4] if not secure])
def test_other_data_or_canary_key_stored_in_the_gap_is_refused_without_overwrite(tiny, tmp_path, monkeypatch, field,
                                                                                 value):
    """As the start-up check refuses them (review misc F1): another sweep's results are kept, not recomputed."""
    configs, path = _configs(tiny, False), tmp_path / "results.sqlite"
    with pytest.raises(ConfigError, match=OTHER[field]) as refused:
        _b_stores_it_in_the_gap(configs, path, monkeypatch, lambda r: dataclasses.replace(r, **{field: value}),
                                caller_checks=True)
    assert "\n" not in str(refused.value) and "--overwrite" in str(refused.value)
    with Store(path) as store:
        assert {getattr(r, field) for r in store.all()} == {value} and len(store.all()) == len(configs)


def test_the_records_recomputed_from_the_gap_are_said_in_one_note(tiny, tmp_path, monkeypatch):
    """One note with the count and the first, not one per training (review misc F2)."""
    configs, notes = [c.model_copy(update={"seed": s}) for c in _configs(tiny, False) for s in (0, 1, 2)], []
    _b_stores_it_in_the_gap(configs, tmp_path / "results.sqlite", monkeypatch,
                            lambda r: dataclasses.replace(r, claim_version=4), caller_checks=True, notes=notes)
    said = [n for n in notes if "start-up check" in n]
    assert len(said) == 1 and said[0].startswith(f"{len(configs)} record(s)"), notes


@pytest.mark.parametrize("overwrite", [False, True])
def test_two_sweeps_replacing_each_other_s_runs_end(tiny, tmp_path, overwrite):
    """The ping-pong of review misc F1: each record A stores, another sweep (of other data) stores again; A recomputes
    a key at most once, then stops with one line, instead of recomputing forever."""
    configs, path, stored = _configs(tiny, False), tmp_path / "results.sqlite", []

    def other_sweep_replaces(records):
        stored.append(records)
        assert len(stored) < 5, "recomputed without end"
        with Store(path) as b:
            b.put_many([dataclasses.replace(r, data_fingerprint="f" * 16) for r in records])

    with Store(path) as a, pytest.raises(ConfigError, match="stored again" if overwrite else "on other data") as err:
        sweep(configs, a, on_done=other_sweep_replaces, replace_other_data=overwrite)
    assert len(stored) == (2 if overwrite else 1) and "\n" not in str(err.value)
    if overwrite:  # review misc3 M4: says how many it recomputed, the reason once, and what to do
        assert "first time" not in str(err.value)  # review hunt3 P6: not 'kept in the store', none is
        assert "(2 recomputed here; of the 2 runs this sweep stored, 0 are still the store's" in str(err.value)
    with Store(path) as store:
        assert {r.data_fingerprint for r in store.all()} == {"f" * 16}  # the other sweep's last records kept


@pytest.mark.parametrize("secure", [False, True])
def test_the_sweep_s_own_check_judges_what_is_stored_right_after_it(tiny, tmp_path, monkeypatch, secure):
    configs = _configs(tiny, secure)
    frame, held, _ = _b_stores_it_in_the_gap(configs, tmp_path / "results.sqlite", monkeypatch,
                                             lambda r: dataclasses.replace(r, data_fingerprint="f" * 16),
                                             caller_checks=False, overwrite=True)
    assert all(r.data_fingerprint != "f" * 16 for r in held.values()) and "f" * 16 not in set(frame.data_fingerprint)


@pytest.mark.parametrize("secure", [False, True])
def test_a_training_stored_in_the_gap_that_passes_is_read_not_retrained(tiny, tmp_path, monkeypatch, secure):
    configs = _configs(tiny, secure)
    frame, held, by_b = _b_stores_it_in_the_gap(configs, tmp_path / "results.sqlite", monkeypatch, lambda r: r,
                                                caller_checks=True)
    seconds = [by_b[c.key()].train_seconds for c in configs]
    assert [held[c.key()].train_seconds for c in configs] == seconds and list(frame.train_seconds) == seconds


def test_other_data_stored_just_before_the_final_read_is_refused_not_reported(tiny, tmp_path):
    """Review misc3 M1: the sweep's last read of the store was not judged, so another sweep's records of other data
    written right before it were reported as this sweep's results, without ``--overwrite``."""
    configs = _configs(tiny, secure=False)
    path = tmp_path / "s.sqlite"
    with Store(path) as a:
        real = a.get_many

        def b_rewrites_then_reads(keys):
            if len(keys) == len(configs):  # the final read of the whole sweep
                with Store(path) as b:
                    b.put_many([dataclasses.replace(r, data_fingerprint="f" * 16, train_seconds=r.train_seconds + 1)
                                for r in real(keys).values()])
            return real(keys)

        a.get_many = b_rewrites_then_reads
        with pytest.raises(ConfigError, match="computed on other data"):
            sweep(configs, a)


#: One damage of each kind the start-up check and the gap find (``gap.KINDS``), made to one stored record.
DAMAGE = {DAMAGED: {"epsilon": 5.0}, OTHER_DATA: {"data_fingerprint": "f" * 16},
          OTHER_KEY: {"canary_key": "abcd" * 4}, STALE: {"claim_version": 4}}


def _said(path, run):
    """What a path says of the one damaged record: the reason its note gives, or its refusal (the store's path
    elided); both paths' notes end '(the first, run <key>: <why>)'."""
    notes = []
    try:
        run(notes)
    except ConfigError as refused:
        return str(refused).replace(str(path), "<store>")
    return [re.search(r"\(the first, run (\w+): (.*)\)$", n).groups() for n in notes if "the first, run" in n]


@pytest.mark.parametrize("overwrite", [False, True])
@pytest.mark.parametrize("kind", KINDS, ids=["damaged", "other-data", "other-canary-key", "earlier-claim-rules"])
def test_the_start_up_check_and_the_gap_flag_each_kind_of_damage_alike(tiny, tmp_path, monkeypatch, kind, overwrite):
    """The one list of tests (``gap.record_problems``): a record damaged before the sweep (its start-up check) and one
    another sweep stores so damaged after that check (the gap) are said with the same reason, or refused alike."""
    assert set(DAMAGE) == set(KINDS)
    configs = _configs(tiny, False)
    target = configs[0].key()

    def mark(r):
        return dataclasses.replace(r, **DAMAGE[kind]) if r.key == target else r

    def before(notes, path=tmp_path / "before" / "results.sqlite"):
        path.parent.mkdir(exist_ok=True)
        with Store(path) as store:
            sweep(configs, store)
            store.put_many([mark(r) for r in store.all()])
            drop_damaged(store, configs, on_note=notes.append, replace_other_data=overwrite)

    def in_the_gap(notes, path=tmp_path / "gap" / "results.sqlite"):
        path.parent.mkdir(exist_ok=True)
        _b_stores_it_in_the_gap(configs, path, monkeypatch, mark, caller_checks=True, overwrite=overwrite,
                                notes=notes)

    said = _said(tmp_path / "before" / "results.sqlite", before)
    assert said and said == _said(tmp_path / "gap" / "results.sqlite", in_the_gap)
    assert isinstance(said, str) or said[0][0] == target


def _with_nan(text, current):
    """Another data's record holding a bare NaN: SQLite's json_valid is 0 for it, Python's json reads it."""
    return json.dumps(dict(json.loads(text), data_fingerprint="f" * 16, prior_mse=float("nan")))


def _twice(text, current):
    """Another data's record naming the fingerprint twice, the data's now first: SQLite reads the first, Python the
    last."""
    return '{"data_fingerprint": %s, %s' % (json.dumps(current), json.dumps(dict(json.loads(text),
                                                                                data_fingerprint="f" * 16))[1:])


@pytest.mark.parametrize("edit", [_with_nan, _twice], ids=["bare-nan", "key-twice"])
def test_a_record_sqlite_and_python_read_apart_is_damaged_not_resumed(tiny, tmp_path, edit):
    """Review tidy F3: a record of other data that is no strict JSON (a bare NaN, a key given twice) was resumed, the
    frame mixing two data; it is damaged (one reader: Python's, strict), deleted and recomputed."""
    configs = _configs(tiny, False)
    path = tmp_path / "results.sqlite"
    with Store(path) as store:
        sweep(configs, store)
        (now,) = {r.data_fingerprint for r in store.all()}
    target = configs[0].key()
    with sqlite3.connect(path) as db:
        ((text,),) = db.execute("SELECT record FROM runs WHERE key = ?", (target,))
        db.execute("UPDATE runs SET record = ? WHERE key = ?", (edit(text, now), target))
    notes = []
    with Store(path) as store:
        frame = sweep(configs, store, on_note=notes.append)
    assert list(frame["data_fingerprint"]) == [now, now]
    assert any(n.startswith("1 damaged record(s)") and target in n and "not JSON" in n for n in notes), notes


def test_a_record_sqlite_reads_as_other_data_is_refused_at_start_up_and_in_the_gap_alike(tiny, tmp_path):
    """A record naming another data's fingerprint first and the data's now last (SQLite reads the first, the strict
    reading calls it damaged) is refused by both checks, on the fields SQLite reads (``gap.refuse_stored_other``)."""
    configs = _configs(tiny, False)
    path = tmp_path / "results.sqlite"
    with Store(path) as store:
        sweep(configs, store)
    target, since = configs[0].key(), time.time()
    with sqlite3.connect(path) as db:
        ((text,),) = db.execute("SELECT record FROM runs WHERE key = ?", (target,))
        damaged = '{"data_fingerprint": "%s", %s' % ("f" * 16, json.dumps(dict(json.loads(text)))[1:])
        db.execute("UPDATE runs SET record = ?, updated = ? WHERE key = ?", (damaged, time.time(), target))
    with Store(path) as store:
        with pytest.raises(ConfigError, match="computed on other data"):
            GapCheck(store, {configs[0].training_key(): configs}, since).refused([c.key() for c in configs])
        with pytest.raises(ConfigError, match="computed on other data"):
            drop_damaged(store, configs, on_note=None)
        assert len(dict(store.texts([c.key() for c in configs]))) == 2  # nothing deleted


def test_a_sweep_ended_by_another_sweep_s_replacements_keeps_its_finished_rows(tiny, tmp_path, monkeypatch):
    """Review hunt3 P6: two --overwrite sweeps on other data; the loser's error came with no results.csv and the
    store held none of its runs, so what it trained was gone. Its finished runs' rows are written beside it."""
    import pandas as pd

    import vflpriv.tradeoff.sweep as sweep_module
    from vflpriv.workflows.experiment import run_into_store

    configs, path, real = _configs(tiny, False), tmp_path / "results.sqlite", sweep_module.sweep

    def replaced_by_another(configs, store, *, on_done, **kwargs):
        def and_replaced(records):
            on_done(records)
            with Store(path) as b:
                b.put_many([dataclasses.replace(r, data_fingerprint="f" * 16) for r in records])

        return real(configs, store, on_done=and_replaced, **kwargs)

    monkeypatch.setattr(sweep_module, "sweep", replaced_by_another)
    with pytest.raises(ConfigError, match="stored again") as err:
        run_into_store(configs, tmp_path / "out", jobs=1, backend="threading", store_path=path, overwrite=True,
                       show_progress=False)
    assert f"the rows of its 2 finished runs are in {tmp_path / 'out' / 'finished.csv'}" in str(err.value)
    rows = pd.read_csv(tmp_path / "out" / "finished.csv")
    assert sorted(rows["key"]) == sorted(c.key() for c in configs) and "f" * 16 not in set(rows["data_fingerprint"])
