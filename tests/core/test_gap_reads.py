"""A training another sweep stores after this sweep's start-up check is read only where its records pass that check's
tests (data fingerprint, canary key, claim rules), plain trainings as secure-noise ones; else it is recomputed."""

from __future__ import annotations

import dataclasses
import time

import pytest

from vflpriv.store.sqlite import Store
from vflpriv.tradeoff.sweep import drop_damaged, sweep


def _configs(tiny, secure):
    defense = {"name": "label-dp", "strength": 2.0, "options": {"secure_noise": True} if secure else {}}
    fast = {"model": {"hidden": 16, "out_dim": 8}, "finetune": {"epochs": 1, "batch_size": 64}, "defenses": [defense]}
    return [tiny(attack={"name": name, "prior": "none", "options": options}, **fast)
            for name, options in (("mc", {"epochs": 1}), ("similarity", {}))]


def _b_stores_it_in_the_gap(configs, path, monkeypatch, mark, *, caller_checks):
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
            frame = sweep(configs, a, checked=True, redo=redo, since=since)
        else:
            def then_b_runs_it(*args, **kwargs):
                monkeypatch.setattr(sweep_module, "drop_damaged", check)  # B's own check is the plain one
                redo = check(*args, **kwargs)
                b_runs_it()
                return redo

            check = sweep_module.drop_damaged
            monkeypatch.setattr(sweep_module, "drop_damaged", then_b_runs_it)
            frame = sweep(configs, a)
        return frame, {r.key: r for r in a.all()}, by_b


CASES = [(field, value, secure) for field, value in (("data_fingerprint", "f" * 16), ("canary_key", "abcd" * 4),
                                                     ("claim_version", 4)) for secure in (False, True)]


@pytest.mark.parametrize(("field", "value", "secure"), CASES)
def test_a_training_stored_in_the_gap_that_fails_the_start_up_check_is_recomputed(tiny, tmp_path, monkeypatch, field,
                                                                                  value, secure):
    configs = _configs(tiny, secure)
    frame, held, by_b = _b_stores_it_in_the_gap(configs, tmp_path / "results.sqlite", monkeypatch,
                                                lambda r: dataclasses.replace(r, **{field: value}), caller_checks=True)
    assert all(getattr(r, field) == value for r in by_b.values())
    assert all(getattr(r, field) != value for r in held.values())  # A's own training replaced B's
    assert list(frame[field]) == [getattr(held[c.key()], field) for c in configs]


@pytest.mark.parametrize("secure", [False, True])
def test_the_sweep_s_own_check_judges_what_is_stored_right_after_it(tiny, tmp_path, monkeypatch, secure):
    configs = _configs(tiny, secure)
    frame, held, _ = _b_stores_it_in_the_gap(configs, tmp_path / "results.sqlite", monkeypatch,
                                             lambda r: dataclasses.replace(r, data_fingerprint="f" * 16),
                                             caller_checks=False)
    assert all(r.data_fingerprint != "f" * 16 for r in held.values()) and "f" * 16 not in set(frame.data_fingerprint)


@pytest.mark.parametrize("secure", [False, True])
def test_a_training_stored_in_the_gap_that_passes_is_read_not_retrained(tiny, tmp_path, monkeypatch, secure):
    configs = _configs(tiny, secure)
    frame, held, by_b = _b_stores_it_in_the_gap(configs, tmp_path / "results.sqlite", monkeypatch, lambda r: r,
                                                caller_checks=True)
    seconds = [by_b[c.key()].train_seconds for c in configs]
    assert [held[c.key()].train_seconds for c in configs] == seconds and list(frame.train_seconds) == seconds
