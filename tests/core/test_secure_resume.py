"""Review fe2 R1: with ``options.secure_noise`` a retraining draws other noise, so a training stored in part is
recomputed whole (never resumed beside records of another training), and the tables never pool two trainings."""

from __future__ import annotations

import dataclasses

import pytest

from vflpriv.common.errors import ConfigError
from vflpriv.reports.results import load_results
from vflpriv.store.sqlite import Store
from vflpriv.tradeoff.sweep import sweep
from vflpriv.workflows.experiment import stored_keys

FAST = {"model": {"hidden": 16, "out_dim": 8}, "finetune": {"epochs": 1, "batch_size": 64},
        "defenses": [{"name": "label-dp", "strength": 2.0, "options": {"secure_noise": True}}]}


def _configs(tiny):
    return [tiny(attack={"name": name, "prior": "none", "options": options}, **FAST)
            for name, options in (("mc", {"epochs": 1}), ("similarity", {}))]


def test_a_secure_noise_training_stored_in_part_is_recomputed_whole(tiny, tmp_path):
    configs = _configs(tiny)
    assert len({c.training_key() for c in configs}) == 1
    notes: list[str] = []
    with Store(tmp_path / "results.sqlite") as store:
        sweep(configs, store)
        first = {r.key: r.train_seconds for r in store.all()}
        store.forget([configs[1].key()])  # an interrupted sweep: one record of the training lost
        assert stored_keys(tmp_path / "results.sqlite", configs) == set()  # a dry run counts none as stored
        sweep(configs, store, on_note=notes.append)
        again = store.all()
    assert len(again) == 2 and len({(r.utility, r.train_seconds) for r in again}) == 1  # one training
    assert again[0].train_seconds != first[configs[0].key()]  # the kept record was recomputed with the rest
    assert any("secure-noise trainings stored in part" in n for n in notes)
    with Store(tmp_path / "results.sqlite") as store:  # a command lacking a stored attack cannot retrain it whole
        store.forget([configs[1].key()])
        with pytest.raises(ConfigError, match=r"runs this command does not make \(mc: "):
            sweep(configs[1:], store)


def test_the_tables_leave_out_a_training_key_written_by_two_trainings(tiny, tmp_path):
    configs = _configs(tiny)
    with Store(tmp_path / "results.sqlite") as store:
        sweep(configs, store)
        mc, sim = sorted(store.all(), key=lambda r: r.attack)
        store.put(dataclasses.replace(sim, utility=sim.utility + 0.05, train_seconds=sim.train_seconds + 1))
    with pytest.raises(ConfigError, match="secure-noise training stored from two trainings"):  # review fe3 F5
        load_results(tmp_path / "results.sqlite")  # every run left out: no empty tables at exit 0


@pytest.mark.parametrize("written", ["as the command writes it", "on another device", "before a field existed"])
def test_a_revised_attack_s_record_of_the_command_s_settings_is_recomputed_however_written(tiny, tmp_path, monkeypatch,
                                                                                          written):
    """Review fe3 F1: after an attack's revision, its old record of the training was taken for an attack the command
    does not run, and the store could no longer be resumed; review l9 L9-3: so was one written on another device, or
    before a field existed (the record's settings text was compared whole)."""
    import json

    from vflpriv.config.registry import ATTACKS

    with Store(tmp_path / "results.sqlite") as store:
        sweep(_configs(tiny), store)
        old = next(r for r in store.all() if r.attack == "mc")
        settings = json.loads(old.config)
        if written == "on another device":
            settings["device"] = "cpu:0"
        elif written == "before a field existed":
            settings["partition"].pop("canary_labels")
        store.put(dataclasses.replace(old, config=json.dumps(settings, sort_keys=True)))
        monkeypatch.setattr(ATTACKS.get("mc"), "revision", ATTACKS.get("mc").revision + 1)
        revised = _configs(tiny)
        sweep(revised, store)
        again = store.all()
    assert sorted(r.key for r in again) == sorted(c.key() for c in revised)
    assert len({(r.utility, r.train_seconds) for r in again}) == 1  # one training


def test_a_failed_record_does_not_make_a_training_mixed(tiny, tmp_path):
    """Review fe3 F2: a failed record (a retry marker) beside the training's ok one dropped the ok run from tables."""
    from vflpriv.store.trainings import mixed_trainings

    configs = _configs(tiny)
    with Store(tmp_path / "results.sqlite") as store:
        sweep(configs, store)
        mc, sim = sorted(store.all(), key=lambda r: r.attack)
    failed = dataclasses.replace(sim, key="f" * 20, status="failed", utility=float("nan"), train_seconds=0.0)
    assert mixed_trainings([mc, sim, failed]) == {}


def test_a_record_of_other_settings_of_an_attack_is_refused_not_deleted(tiny, tmp_path):
    """Review l8 1: a stored mc with epochs 1 was deleted (and said recomputed) when the command ran mc with epochs 2
    on the same secure-noise training; it is refused, and the store keeps it."""
    first = _configs(tiny)
    other = [tiny(attack={"name": "mc", "prior": "none", "options": {"epochs": 2}}, **FAST), first[1]]
    with Store(tmp_path / "results.sqlite") as store:
        sweep(first, store)
        with pytest.raises(ConfigError, match=r"runs this command does not make \(mc: "):
            sweep(other, store)
        assert first[0].key() in {r.key for r in store.all()}


def test_a_training_another_sweep_stored_in_part_meanwhile_is_run_whole(tiny, tmp_path):
    """Review fe3 F3: sweep A checked the store before sweep B stored part of their training; A's loop then ran only
    the rest, and A's own frame (results.csv, CAP) showed two trainings under one key with no warning."""
    from vflpriv.tradeoff.sweep import drop_damaged

    configs, path, notes = _configs(tiny), tmp_path / "results.sqlite", []
    with Store(path) as a, Store(path) as b:
        drop_damaged(a, configs, on_note=notes.append)  # sweep A opens the store: nothing stored yet
        sweep(configs[:1], b)  # sweep B (mc only) claims the training first and stores mc
        frame = sweep(configs, a, checked=True, on_note=notes.append)
        held = a.all()
    assert len(frame) == 2 and len(set(zip(frame.utility, frame.train_seconds))) == 1  # A's frame: one training
    assert len(held) == 2 and len({(r.utility, r.train_seconds) for r in held}) == 1
    assert any("by another sweep, replaced by its whole training" in n for n in notes)
    assert not load_results(path).attrs["mixed"]


def test_a_training_another_sweep_stored_with_other_settings_meanwhile_is_refused(tiny, tmp_path):
    """Review fe3 F3: run whole, the training would leave sweep B's run of other settings beside another training."""
    from vflpriv.tradeoff.sweep import drop_damaged

    configs, path = _configs(tiny), tmp_path / "results.sqlite"
    other = tiny(attack={"name": "mc", "prior": "none", "options": {"epochs": 2}}, **FAST)
    assert other.training_key() == configs[0].training_key() and other.key() != configs[0].key()
    with Store(path) as a, Store(path) as b:
        drop_damaged(a, configs, on_note=None)  # sweep A opens the store: nothing stored yet
        sweep([other], b)  # sweep B (mc with 2 epochs) claims the training first and stores its run
        with pytest.raises(ConfigError, match=r"runs this command does not make \(mc: "):
            sweep(configs, a, checked=True)
        assert [r.key for r in a.all()] == [other.key()]  # nothing of B's deleted


def test_a_sweep_interrupted_before_its_training_keeps_another_sweep_s_records(tiny, tmp_path, monkeypatch):
    """Review st S1: the start-up check deleted another sweep's records of a secure-noise training this command runs
    whole, so an interrupted command lost them; the training's run overwrites them instead, as the loop does."""
    import vflpriv.tradeoff.sweep as sweep_module

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    configs = _configs(tiny)
    with Store(tmp_path / "results.sqlite") as store:
        sweep(configs[:1], store)  # sweep B (mc only) finished
        kept = [(r.key, r.train_seconds) for r in store.all()]
        monkeypatch.setattr(sweep_module, "run_all", interrupted)
        with pytest.raises(KeyboardInterrupt):
            sweep(configs, store)  # sweep A (mc, similarity) interrupted before its training is stored
        assert [(r.key, r.train_seconds) for r in store.all()] == kept


def test_a_training_stored_from_two_trainings_is_recomputed_whole(tiny, tmp_path):
    """Review st S1: kept for the run to overwrite (not deleted first), such a training's records all count as stored;
    the loop must still recompute it."""
    configs = _configs(tiny)
    with Store(tmp_path / "results.sqlite") as store:
        sweep(configs, store)
        mc, sim = sorted(store.all(), key=lambda r: r.attack)
        store.put(dataclasses.replace(sim, utility=sim.utility + 0.05, train_seconds=sim.train_seconds + 1))
        sweep(configs, store)
        again = store.all()
    assert len({(r.utility, r.train_seconds) for r in again}) == 1 and again[0].train_seconds != mc.train_seconds


def test_a_record_another_sweep_deletes_before_the_final_read_is_recomputed(tiny, tmp_path, monkeypatch):
    """Review st S1: a key deleted (by another sweep) between the loop's last look and the frame's read raised
    AttributeError on the missing record; it is computed again."""
    configs = _configs(tiny)[:1]
    read = Store.get_many

    def deleted_first(self, keys):
        monkeypatch.setattr(Store, "get_many", read)
        self.forget([configs[0].key()])  # another sweep's start-up deletes it (e.g. a damaged record) meanwhile
        return read(self, keys)

    monkeypatch.setattr(Store, "get_many", deleted_first)
    with Store(tmp_path / "results.sqlite") as store:
        frame = sweep(configs, store)
        assert [r.key for r in store.all()] == [configs[0].key()]
    assert list(frame.key) == [configs[0].key()]


def test_a_sweep_says_when_another_sweep_replaced_its_records_before_its_final_read(tiny, tmp_path, monkeypatch):
    """Review st S3: sweep B's results were another training's than the one it computed, and it said nothing."""
    configs, path, notes = _configs(tiny), tmp_path / "results.sqlite", []
    read = Store.get_many

    def replaced_first(self, keys):
        monkeypatch.setattr(Store, "get_many", read)
        with Store(path) as a:
            sweep(configs, a)  # sweep A (mc, similarity) runs the training whole, replacing B's mc
        return read(self, keys)

    with Store(path) as b:
        monkeypatch.setattr(Store, "get_many", replaced_first)
        frame = sweep(configs[:1], b, on_note=notes.append)  # sweep B (mc only)
        assert list(frame.train_seconds) == [r.train_seconds for r in b.all() if r.key == configs[0].key()]
    assert any("replaced in the store meanwhile by another sweep" in n for n in notes)


def _b_runs_it_whole_after_a_checks(configs, path, monkeypatch, mark=lambda r: r, overwrite=False):
    """Sweep A (mc, similarity) over a training an earlier sweep stored in part, while sweep B runs it whole between
    A's start-up check and A's loop, its records then re-put through ``mark``: (A's frame, held, B's records)."""
    import vflpriv.tradeoff.sweep as sweep_module

    check, by_b = sweep_module.drop_damaged, {}

    def then_b_runs_it_whole(store, *args, **kwargs):
        monkeypatch.setattr(sweep_module, "drop_damaged", check)
        redo = check(store, *args, **kwargs)
        with Store(path) as b:
            sweep(configs, b)  # sweep B (mc, similarity) runs the training whole meanwhile
            b.put_many([mark(r) for r in b.all()])
            by_b.update((r.key, r) for r in b.all())
        return redo

    with Store(path) as a:
        sweep(configs[:1], a)  # an earlier sweep (mc only) stored the training in part
        monkeypatch.setattr(sweep_module, "drop_damaged", then_b_runs_it_whole)
        frame = sweep(configs, a, replace_other_data=overwrite)  # sweep A (mc, similarity)
        return frame, {r.key: r for r in a.all()}, by_b


def test_a_training_another_sweep_finishes_whole_after_the_start_up_check_is_read_not_retrained(tiny, tmp_path,
                                                                                               monkeypatch):
    """Review st2 left: sweep B ran the training whole between sweep A's start-up check (which found it stored in
    part) and A's loop; A retrained it once more. A re-checks the store before retraining and reads B's records."""
    configs = _configs(tiny)
    frame, held, by_b = _b_runs_it_whole_after_a_checks(configs, tmp_path / "results.sqlite", monkeypatch)
    seconds = {k: r.train_seconds for k, r in by_b.items()}
    assert {k: r.train_seconds for k, r in held.items()} == seconds
    assert list(frame.train_seconds) == [seconds[c.key()] for c in configs]  # B's training, read


@pytest.mark.parametrize("field, value", [("data_fingerprint", "f" * 16), ("canary_key", "abcd" * 4),
                                          ("claim_version", 4)])
def test_a_training_another_sweep_finished_is_read_only_where_the_start_up_check_would_keep_it(
        tiny, tmp_path, monkeypatch, field, value):
    """Review small F1: B's whole training was read even where its records were of other data, another canary key or
    earlier claim rules, which A's start-up check deletes or refuses: A's results.csv reported them. A retrains (with
    --overwrite where the check refuses them: tests/core/test_gap_reads.py)."""
    configs = _configs(tiny)
    frame, held, by_b = _b_runs_it_whole_after_a_checks(configs, tmp_path / "results.sqlite", monkeypatch,
                                                        lambda r: dataclasses.replace(r, **{field: value}),
                                                        overwrite=field != "claim_version")
    assert all(getattr(r, field) != value for r in held.values())  # A's own training replaced B's
    assert all(held[k].train_seconds != r.train_seconds for k, r in by_b.items())
    assert list(frame.train_seconds) == [held[c.key()].train_seconds for c in configs]
