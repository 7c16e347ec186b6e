"""Stored runs whose canaries were drawn with another canary key (the key rotated, another cache root) are not
reused as if they were this key's: a write command refuses them in planning (set the key they used, another store,
or --overwrite to recompute them), and the planning check creates no key."""

from __future__ import annotations

from dataclasses import replace

import pytest

from vflpriv.common.errors import ConfigError
from vflpriv.config.schema import RunConfig
from vflpriv.runner.execution import blank_record
from vflpriv.store.secrets import ENV_VAR, canary_key, current_fingerprint, fingerprint
from vflpriv.store.sqlite import Store
from vflpriv.tradeoff.sweep import drop_damaged
from vflpriv.workflows.experiment import stored_keys

KEY, OTHER = "ab" * 32, "cd" * 32


def _config(canaries: int) -> RunConfig:
    return RunConfig.model_validate({"partition": {"canaries": canaries}, "attack": {"name": "gc"}})


def _stored(tmp_path, canary_key_fingerprint: str, canaries: int = 10):
    config = _config(canaries)
    record = replace(blank_record(config), training_key="t", num_classes=10, status="ok",
                     canary_key=canary_key_fingerprint)  # named as the runner names it (review hunt H5)
    path = tmp_path / "r.sqlite"
    with Store(path) as store:
        store.put(record)
    return path, config


def test_runs_of_another_canary_key_are_refused_or_recomputed(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, KEY)
    path, config = _stored(tmp_path, fingerprint(bytes.fromhex(OTHER)))
    assert stored_keys(path, [config]) == set()  # a dry run counts it as to run
    with Store(path) as store, pytest.raises(ConfigError, match="another canary key.*--overwrite"):
        drop_damaged(store, [config], on_note=None)
    notes = []
    with Store(path) as store:
        drop_damaged(store, [config], on_note=notes.append, replace_other_data=True)
        assert store.get(config.key()) is None
    assert notes and "record(s) of another canary key" in notes[0]


@pytest.mark.parametrize("stored_key, canaries", [(KEY, 10), ("", 0)])
def test_runs_of_this_key_or_without_canaries_are_reused(stored_key, canaries, tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_VAR, KEY)
    path, config = _stored(tmp_path, fingerprint(bytes.fromhex(stored_key)) if stored_key else "", canaries)
    assert stored_keys(path, [config]) == {config.key()}
    with Store(path) as store:
        drop_damaged(store, [config], on_note=None)
        assert store.get(config.key()) is not None


def test_the_planning_check_makes_no_key(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path / "cache"))
    assert current_fingerprint() == "" and not (tmp_path / "cache").exists()
    made = fingerprint(canary_key())
    assert current_fingerprint() == made  # once made, the same key
