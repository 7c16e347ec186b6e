"""Store keys are stable across versions: the configurations of a store written by vflpriv 0.1 (before the regroup,
the canaries and the device column) hash to the keys that store holds, so it resumes instead of rerunning; a setting
added since changes the key only where it is set."""

from __future__ import annotations

import json
from pathlib import Path

from vflpriv.config.schema import RunConfig

FIXTURE = Path(__file__).parent / "fixtures" / "keys-0.1.json"


def _recorded() -> list[dict]:
    return json.loads(FIXTURE.read_text())


def test_a_store_written_by_0_1_keeps_its_keys():
    for entry in _recorded():
        config = RunConfig.model_validate(entry["config"])
        assert config.key() == entry["key"] and config.training_key() == entry["training_key"]


def test_canaries_change_the_keys_only_where_set():
    config = RunConfig.model_validate(_recorded()[0]["config"])
    with_canaries = config.model_copy(update={"partition": config.partition.model_copy(update={"canaries": 10})})
    assert with_canaries.key() != config.key() and with_canaries.training_key() != config.training_key()
    assert config.model_copy(update={"device": "cuda:3"}).key() == config.key()  # the device is no part of a key


def test_every_setting_added_later_changes_the_keys_only_away_from_its_neutral_value():
    from vflpriv.config.keys import ADDED_LATER

    config = RunConfig.model_validate(_recorded()[0]["config"])
    changed = {"curve": True, "canaries": 10, "top_depth": 2, "bn_recalibrate": True, "validation": 0.2,
               "auditor": "gradient-lrt", "auditor_options": {"canary_inputs": "crafted"}, "aux_features": 12,
               "adversary": 0, "victim": 1, "canary_labels": "pair"}
    assert {name for _, name, _ in ADDED_LATER} == set(changed)
    planted = {"canary_labels": {"canaries": 10}}  # how canaries' labels are drawn matters only where they are planted
    attacked = {"aux_features": {"name": "fi-decoder"}}  # read by feature attacks only: not in a label run's key
    for section, name, neutral in ADDED_LATER:
        part = getattr(config, section).model_copy(update=planted.get(name, {}))
        attack = config.attack.model_copy(update=attacked.get(name, {}))
        base = config.model_copy(update={section: part, "attack": attack})
        at_neutral = base.model_copy(update={section: part.model_copy(update={name: neutral})})
        moved = base.model_copy(update={section: part.model_copy(update={name: changed[name]})})
        assert at_neutral.key() == base.key() and moved.key() != base.key(), name
    unplanted = config.partition.model_copy(update={"canaries": 0, "canary_labels": "pair"})
    assert config.model_copy(update={"partition": unplanted}).key() == config.key()  # no canary: pair is moot


def test_a_revised_method_s_runs_get_keys_of_their_own_and_other_methods_keep_theirs(monkeypatch):
    from vflpriv.config.registry import METHODS

    hssl = RunConfig.model_validate({"method": {"name": "fedhssl"}})
    split = RunConfig.model_validate({"method": {"name": "splitnn"}})
    now = (hssl.key(), hssl.training_key(), split.key())
    monkeypatch.setattr(METHODS.get("fedhssl"), "revision", 0)  # as before the train-mode guidance target
    assert hssl.key() != now[0] and hssl.training_key() != now[1] and split.key() == now[2]
    monkeypatch.setattr(METHODS.get("fedhssl"), "revision", 2)
    assert hssl.key() not in (now[0],)


def test_a_revised_defense_s_runs_get_keys_of_their_own(monkeypatch):
    from vflpriv.config.registry import DEFENSES

    run = RunConfig.model_validate({"defenses": [{"name": "dp-gaussian", "strength": 1.0}]})
    plain = RunConfig.model_validate({"defenses": [{"name": "iso", "strength": 1.0}]})
    now = (run.key(), plain.key())
    monkeypatch.setattr(DEFENSES.get("dp-gaussian"), "revision", 0)  # as the per-message mechanism of 0.1
    assert run.key() != now[0] and plain.key() == now[1]


def test_a_name_without_a_revision_keys_as_before_revisions_existed(monkeypatch):
    """An unknown name (the planner refuses it later) and a component that declares no revision (a duck-typed
    plugin) are keyed without a revision marker: their keys are what they were before revisions existed."""
    from vflpriv.config.keys import keyed
    from vflpriv.config.registry import METHODS

    monkeypatch.setitem(METHODS._extra, "test-no-revision", type("NoRevision", (), {}))  # gone after the test
    for name in ("no-such-method", "test-no-revision"):
        dump = {"method": {"name": name}, "defenses": [{"name": "no-such-defense"}]}
        assert keyed(dump) == {"method": {"name": name}, "defenses": [{"name": "no-such-defense"}]}
