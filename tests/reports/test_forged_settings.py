"""Review hunt3 P1: a record's settings were never checked against its key, so a store whose ``config`` was edited (the
strength 2 -> 8 with its epsilon recomputed, another validation fraction) showed an epsilon no run had, and a resume
reused the record. Settings that do not hash to their record's key are damage; a record of an earlier revision of a
component, of settings written as an earlier code wrote them, or of a plugin edited since is not."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

import vflpriv.config.keys as keys_module
from vflpriv.config.keys import config_hash, keyed
from vflpriv.config.registry import DEFENSES
from vflpriv.config.schema import RunConfig
from vflpriv.config.sweep import ExperimentConfig
from vflpriv.defenses.dp_gaussian import GaussianDP, label_reads, spent
from vflpriv.reports.results import load_results
from vflpriv.runner.accountants import ACCOUNTANTS
from vflpriv.runner.execution import blank_record
from vflpriv.store.records import CLAIM_VERSION
from vflpriv.store.sqlite import Store
from vflpriv.tradeoff.sweep import drop_damaged


def _run(strength: float = 2.0, defense: str = "dp-gaussian", seed: int = 0, **changes):
    return ExperimentConfig.model_validate({"attack": {"name": "mc"}, "strengths": [strength], "seeds": [seed],
                                            "defenses": [{"name": defense, "sweep": True}], **changes}).runs()[0]


def _record(run):
    """A scored record as the runner writes it, with the epsilon its accountant gives its settings."""
    o = run.swept.options
    delta = o.get("delta", 1e-5)
    return replace(blank_record(run), num_classes=10, utility=0.8, attack_accuracy=0.4, prior_accuracy=0.1,
                   leakage=0.3, strength_axis="sigma", n_targets=4, epsilon_delta=delta,
                   epsilon=spent(run.swept.strength, delta=delta, uses=label_reads(run.finetune)),
                   epsilon_accounting=json.dumps([{"defense": 0, "revision": GaussianDP.revision, "secret": "labels",
                                                   "count": label_reads(run.finetune)}]))


def _store(tmp_path, *records) -> Store:
    store = Store(tmp_path / "results.sqlite")
    store.put_many([_record(_run(seed=1)), *records])  # a sound record beside them: the table is not empty
    return store


#: A forger's record: another run's settings, fields and recomputed epsilon, under the key of ``_run()``.
FORGED = {"sigma 2 -> 8": lambda: _run(8.0), "another validation": lambda: _run(finetune={"validation": 0.5})}


@pytest.mark.parametrize("forged", sorted(FORGED))
def test_settings_of_another_run_are_damaged_where_read_and_where_resumed(tmp_path, forged):
    key = _run().key()
    store = _store(tmp_path, replace(_record(FORGED[forged]()), key=key))
    frame = load_results(tmp_path / "results.sqlite")
    assert key not in set(frame["key"]), frame[["key", "strength", "epsilon"]]
    assert [k for k, _ in frame.attrs["damaged"]] == [key]
    assert "its settings hash to another run's key" in frame.attrs["damaged"][0][1]
    drop_damaged(store, [_run()], on_note=None)  # a strength 8 is misnamed there (its planned settings say 2)
    assert store.get(key) is None


def test_a_record_of_an_earlier_revision_is_read_as_earlier_not_damaged(tmp_path, monkeypatch):
    """Its key marks dp-gaussian's revision 0 (as a store of 0.1 was keyed): recomputed on resume (another key), read
    as the earlier code's record, its epsilon of earlier claim rules withheld."""
    run = _run()
    with monkeypatch.context() as patch:  # the class's revision assigned would make it a patched class (its code keyed)
        patch.setattr(keys_module, "_revision", lambda registry, name: 0)
        old_key = run.key()
    assert old_key != run.key()
    _store(tmp_path, replace(_record(run), key=old_key, claim_version=CLAIM_VERSION - 1))
    frame = load_results(tmp_path / "results.sqlite")
    assert frame.attrs["damaged"] == [] and old_key in set(frame["key"])
    assert math.isnan(frame.set_index("key").loc[old_key, "epsilon"])
    store = Store(tmp_path / "results.sqlite")
    store.put(_record(run))
    frame = load_results(tmp_path / "results.sqlite")
    assert old_key not in set(frame["key"]) and [k for k, _ in frame.attrs["superseded"]] == [old_key]


#: Settings as an earlier code wrote and keyed them: a label attack's with ``partition.aux_features`` (before
#: ``as_read``), an option at its default (before ``config.defaults`` dropped it).
AS_WRITTEN = {"aux_features": lambda c: c["partition"].update(aux_features=5),
              "an option at its default": lambda c: c["defenses"][0]["options"].update(clip=1.0)}


@pytest.mark.parametrize("written", sorted(AS_WRITTEN))
def test_settings_keyed_as_an_earlier_code_wrote_them_are_not_damaged(tmp_path, written):
    run = _run()
    config = json.loads(run.recorded())
    AS_WRITTEN[written](config)
    old_key = config_hash(keyed({k: v for k, v in json.loads(json.dumps(config)).items() if k != "device"}))
    assert old_key != run.key()
    _store(tmp_path, replace(_record(run), key=old_key, config=json.dumps(config, sort_keys=True)))
    frame = load_results(tmp_path / "results.sqlite")
    assert frame.attrs["damaged"] == [] and old_key in set(frame["key"])


def test_a_plugin_edited_since_its_record_withholds_the_epsilon_and_a_resume_recomputes_a_forged_one(
        tmp_path, monkeypatch):
    """A plugin defense's code is in its key (``keys.code_mark``): a read cannot restate an earlier one's, so a record
    under another key reads as the earlier code's with its epsilon withheld; under the key a sweep plans, settings of
    another run are damage."""

    class Plug(GaussianDP):
        pass

    monkeypatch.setitem(DEFENSES._extra, "plug-dp", Plug)
    run = _run(defense="plug-dp")
    with monkeypatch.context() as patch:
        patch.setattr(keys_module, "loaded_code", lambda cls: "the plugin's earlier code")
        old_key = run.key()
    _store(tmp_path, replace(_record(run), key=old_key))
    frame = load_results(tmp_path / "results.sqlite")
    assert frame.attrs["damaged"] == [] and math.isnan(frame.set_index("key").loc[old_key, "epsilon"])
    assert [k for k, why in frame.attrs["withheld"] if "plugin plug-dp" in why] == [old_key]
    store = Store(tmp_path / "results.sqlite")
    store.put(replace(_record(_run(defense="plug-dp", finetune={"validation": 0.5})), key=run.key()))
    notes = []
    drop_damaged(store, [run], on_note=notes.append)
    assert store.get(run.key()) is None and "its settings hash to another run's key" in notes[0]


def _settings_no_run_accepts(edit):
    """A record of ``_run()``'s settings edited by ``edit`` (its defense's JSON), under their own key (a forger who
    recomputes the key too), its epsilon what dp-gaussian's accountant gives them."""
    config = json.loads(_run().recorded())
    edit(config["defenses"][0])
    run = RunConfig.model_validate(config)
    d = run.defenses[0]
    epsilon, delta = ACCOUNTANTS[GaussianDP].epsilon(GaussianDP, d.strength, run.finetune, d.options,
                                                      label_reads(run.finetune))
    return replace(_record(run), epsilon=epsilon, epsilon_delta=delta)


#: Settings planning refuses, each with what the read says: a strength beside target_epsilon (the column headed
#: sigma=2 showed the target's 0.495), delta 0.5 (>= 1/n: epsilon 0.19 at a vacuous delta), a strength off its axis.
REFUSED = {"a strength beside target_epsilon": (lambda d: d["options"].update(target_epsilon=0.5), "not both"),
           "delta 0.5": (lambda d: d["options"].update(delta=0.5), "options.delta 0.5 is not below 1/200"),
           "a strength off its axis": (lambda d: d.update(strength=2e6), "must lie in [0, 1e+06], got 2e+06")}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_settings_no_run_accepts_are_damaged_under_their_own_key(tmp_path, case):
    edit, why = REFUSED[case]
    record = _settings_no_run_accepts(edit)
    _store(tmp_path, record)
    frame = load_results(tmp_path / "results.sqlite")
    assert [k for k, _ in frame.attrs["damaged"]] == [record.key], frame[["key", "strength", "epsilon"]]
    assert "its settings are not a run's" in frame.attrs["damaged"][0][1] and why in frame.attrs["damaged"][0][1]


def test_settings_the_current_code_cannot_read_never_show_their_epsilon(tmp_path):
    """Review int F1: the sigma 2 -> 8 forgery with one unknown setting added ({"zzz": 1}) failed validation, so no
    check ran and the table showed sigma=8's epsilon; such a record's epsilon is withheld (fail closed)."""
    key = _run().key()
    forged = _record(_run(8.0))
    config = dict(json.loads(forged.config), zzz=1)
    _store(tmp_path, replace(forged, key=key, config=json.dumps(config)))
    frame = load_results(tmp_path / "results.sqlite")
    shown = frame[frame["key"] == key]
    assert len(shown) <= 1 and (shown.empty or math.isnan(shown["epsilon"].iloc[0])), shown[["strength", "epsilon"]]
    assert any(k == key for k, _ in frame.attrs["withheld"] + frame.attrs["damaged"]), frame.attrs
