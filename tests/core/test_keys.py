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


#: Runs giving no setting at its default, each kind of component with options of its own (method, label, feature and
#: acting attacks, a tuned one, training and message defenses, an auditor), with their (key, training key): what a
#: store holds for them (review hunt H8: keying options without their defaults must leave these as they were).
PINNED = [
    ({"defenses": [{"name": "dp-gaussian", "strength": 0.5, "sweep": True}]},
     ("79dd16c4a98b300f725c", "0dcccb2334ebf2a0501f")),
    ({"defenses": [{"name": "dp-gaussian", "strength": 0.5, "sweep": True, "options": {"clip": 2}}]},
     ("3a7c8f781098e0ad7e8a", "9284f660c01182ac30e1")),
    ({"attack": {"name": "fi-decoder"},
      "defenses": [{"name": "embedding-dp", "strength": 0.5, "sweep": True, "options": {"secure_noise": True}}]},
     ("19e0ef9878c7a46127a9", "1dea309075654a63a483")),
    ({"defenses": [{"name": "iso", "strength": 1.0, "sweep": True, "kinds": ["embedding", "gradient"]}]},
     ("c9fa44168bebeb5f8f4c", "130f59bbe787d59019bb")),
    ({"defenses": [{"name": "label-dp", "strength": 1.0, "sweep": True}]},
     ("704855557e688b263f7f", "578116ceba1ca8e0b5c1")),
    ({"defenses": [{"name": "alibi", "strength": 1.0, "sweep": True}]},
     ("543758d5d1c9d5346de2", "efb01f7bbf7a0f2f06c0")),
    ({"attack": {"name": "mc", "options": {"epochs": 2}}}, ("495352f79eafc1c015fb", "fef31a69ea0a32f607b9")),
    ({"attack": {"name": "mc", "tune": True, "search_budget": 4, "options": {"epochs": 2}}},
     ("8fcfacf44f72738911b2", "fef31a69ea0a32f607b9")),
    ({"attack": {"name": "mc-active", "options": {"lr": 0.01}}}, ("aeccd78d51aa264f857e", "9fa92317e56f696b132f")),
    ({"attack": {"name": "grn", "options": {"epochs": 1}}}, ("db4505526d52927ef9bd", "fef31a69ea0a32f607b9")),
    ({"method": {"name": "fedhssl", "options": {"pooling": "concat"}}},
     ("b264fd51758bfb04bc97", "cb824780883a9d1c8ecf")),
    ({"partition": {"canaries": 10}, "defenses": [{"name": "dp-gaussian", "strength": 1.0, "sweep": True}],
      "finetune": {"auditor": "gradient-lrt", "auditor_options": {"canary_inputs": "crafted"}}},
     ("5d35b0b2f8e52054e184", "847ca5f7bcc3286a35f0")),
    ({"method": {"name": "local-simsiam"}, "attack": {"name": "mc", "prior": "same-attack"}},
     ("e3f51609a2ae0210084c", "15e70867635056ca127f")),
]


def test_runs_giving_no_default_keep_their_keys():
    for settings, keys in PINNED:
        run = RunConfig.model_validate(settings)
        assert (run.key(), run.training_key()) == keys, settings


def test_the_plain_class_constants_a_plugin_s_key_reads_are_declarations_scalars_and_tuple_frozenset(monkeypatch):
    """keys.py restated declarations.SCALARS: a scalar kind added there is one whose class constants a plugin's code
    key reads by value (here complex: 1j and 2j key apart, and a subclass's), from one list."""
    import importlib

    from vflpriv.common import declarations
    from vflpriv.config import keys

    monkeypatch.setattr(declarations, "SCALARS", (*declarations.SCALARS, complex))
    try:
        importlib.reload(keys)
        assert keys.loaded_code(type("P", (), {"x": 1j})) != keys.loaded_code(type("P", (), {"x": 2j}))
        c = type("C", (complex,), {})  # a subclass constant (numpy.complex128) keyed by value too (review misc F4)
        assert keys.loaded_code(type("P", (), {"x": c(1j)})) != keys.loaded_code(type("P", (), {"x": c(2j)}))
    finally:
        monkeypatch.undo()
        importlib.reload(keys)
    assert keys.loaded_code(type("P", (), {"x": 1})) != keys.loaded_code(type("P", (), {"x": 2}))
