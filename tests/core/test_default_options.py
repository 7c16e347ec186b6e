"""Review hunt H8: a component's option given at its default (``defenses.0.options.secure_noise=false``, ``clip=1``,
``delta=1e-5``, an attack's, a method's or an auditor's) is the run that leaves it out: one key, one training, one
record's settings, one table row; a value other than the default, a plugin's options and a refused value stay as
given."""

from __future__ import annotations

import json

import pytest

from vflpriv.config.keys import config_hash, keyed
from vflpriv.config.registry import DEFENSES, METHODS
from vflpriv.config.schema import RunConfig
from vflpriv.reports.results import load_results
from vflpriv.runner.execution import pretrain_key
from vflpriv.store.records import RunRecord
from vflpriv.store.sqlite import Store

EMBEDDING_DP = {"attack": {"name": "fi-decoder"},
                "defenses": [{"name": "embedding-dp", "strength": 0.5, "sweep": True}]}

#: (settings leaving the option out, the section given it, its options at their defaults, spelled several ways).
AT_DEFAULT = [
    (EMBEDDING_DP, ("defenses", 0), {"secure_noise": False}),
    (EMBEDDING_DP, ("defenses", 0), {"clip": 1, "delta": 1e-5, "private_bottom": True}),
    ({"defenses": [{"name": "label-dp", "strength": 1.0, "sweep": True}]}, ("defenses", 0),
     {"first_share": None, "prior": "uniform"}),  # a None default, given
    ({"attack": {"name": "mc"}}, ("attack",), {"head": "linear", "train_bottom": False}),
    ({"attack": {"name": "mc-active"}}, ("attack",), {"temperature": 0.8}),  # acting: its training is its own
    ({"method": {"name": "local-simsiam"}, "attack": {"name": "mc", "prior": "same-attack"}}, ("attack",),
     {"head": "linear"}),  # the same-attack prior's key holds the attack's options
    ({"method": {"name": "fedhssl"}}, ("method",), {"pooling": "mean", "crop_scale": [0.5, 1.0]}),  # a tuple default
    ({"partition": {"canaries": 10}, "finetune": {"auditor": "gradient-lrt"},
      "defenses": [{"name": "dp-gaussian", "strength": 1.0, "sweep": True}]}, ("finetune",),
     {"canary_inputs": "natural"}),
]


def _given(settings: dict, where: tuple, options: dict) -> dict:
    """``settings`` with ``options`` given to the section at ``where`` (a method's, an attack's, a defense's or the
    auditor's)."""
    out = json.loads(json.dumps(settings))
    section = out.setdefault(where[0], {})
    section = section[where[1]] if len(where) > 1 else section
    section["auditor_options" if where[0] == "finetune" else "options"] = options
    return out


@pytest.mark.parametrize("settings, where, options", AT_DEFAULT)
def test_an_option_given_at_its_default_is_the_run_that_leaves_it_out(settings, where, options):
    unset, given = RunConfig.model_validate(settings), RunConfig.model_validate(_given(settings, where, options))
    assert given.key() == unset.key() and given.training_key() == unset.training_key()
    assert given.recorded() == unset.recorded() and given == unset  # every key made of the settings: the same
    method = METHODS.get(given.method.name)
    assert pretrain_key(given, method) == pretrain_key(unset, method)


def test_a_value_other_than_the_default_stays_beside_a_default_dropped():
    run = RunConfig.model_validate(_given(EMBEDDING_DP, ("defenses", 0), {"clip": 2, "secure_noise": False}))
    assert run.defenses[0].options == {"clip": 2}  # as written: the key of a run giving clip 2 is what it was
    refused = RunConfig.model_validate(_given(EMBEDDING_DP, ("defenses", 0), {"clip": -1, "secure_noise": False}))
    assert refused.defenses[0].options == {"clip": -1, "secure_noise": False}  # the planner names the bad value


def test_a_plugin_s_options_stay_as_given(monkeypatch):
    """A plugin's ``Options`` are its code, which planning judges before any of it runs: not read while validating."""
    monkeypatch.setitem(DEFENSES._extra, "test-plugin-dp", DEFENSES.get("embedding-dp"))
    run = RunConfig.model_validate({"defenses": [{"name": "test-plugin-dp", "options": {"secure_noise": False}}]})
    assert run.defenses[0].options == {"secure_noise": False}


def test_a_table_shows_one_variant_of_records_written_with_a_default_given_and_left_out(tmp_path):
    """A store written before: seed 0 with ``secure_noise`` left out and given false, seed 1 given false (its own key
    then): one row of seeds 0 and 1, seed 0's second record left out as the same run."""
    store = Store(tmp_path / "results.sqlite")
    keys = []
    for seed, options in ((0, {}), (0, {"secure_noise": False}), (1, {"secure_noise": False})):
        run = RunConfig.model_validate({**_given(EMBEDDING_DP, ("defenses", 0), options), "seed": seed})
        config = json.loads(run.recorded())
        config["defenses"][0]["options"] = options  # as the earlier code wrote it, under the key it gave them
        keys.append(config_hash(keyed({k: v for k, v in json.loads(json.dumps(config)).items() if k != "device"})))
        store.put(RunRecord(
            key=keys[-1], training_key=run.training_key(), method="splitnn", dataset="digits",
            attack="fi-decoder", defense="embedding-dp", phase="finetune", strength=0.5, strength_axis="sigma",
            strength_stronger="higher", strength_identity=0.0, num_classes=10, seed=seed, utility=0.8,
            secret="features", adversary="0", victim="1", feature_mse=0.05, prior_mse=0.08, n_targets=3,
            attack_errors=json.dumps([0.05] * 3), prior_errors=json.dumps([0.08] * 3), config=json.dumps(config)))
    frame = load_results(tmp_path)
    assert sorted(frame["seed"]) == [0, 1] and frame["variant"].nunique() == 1, frame["variant"].tolist()
    [(key, why)] = frame.attrs["superseded"]
    assert key == keys[1] and "an option at its default" in why


def test_a_dry_run_given_a_default_finds_the_run_stored_without_it(tmp_path):
    """The review's symptom: ``--set defenses.0.options.secure_noise=false`` planned its stored run again."""
    from dataclasses import replace

    from typer.testing import CliRunner

    from vflpriv.cli import app
    from vflpriv.cli.evaluate import build_experiment
    from vflpriv.runner.execution import blank_record

    given = dict(config=None, method=None, attack="fi-decoder", defense="embedding-dp", dataset=None,
                 strengths="0.5", seeds="0", phase=None, jobs=None, backend=None, device=None, overrides=[])
    [run] = build_experiment(**given).runs()
    Store(tmp_path / "results.sqlite").put(replace(
        blank_record(run), status="ok", utility=0.8, feature_mse=0.05, prior_mse=0.08, n_targets=3, num_classes=10,
        strength_axis="sigma", strength_stronger="higher", strength_identity=0.0,
        attack_errors=json.dumps([0.05] * 3), prior_errors=json.dumps([0.08] * 3)))
    result = CliRunner().invoke(app, ["evaluate", "--attack", "fi-decoder", "--defense", "embedding-dp", "--strengths",
                                      "0.5", "--seeds", "0", "--set", "defenses.0.options.secure_noise=false",
                                      "--set", "defenses.0.options.clip=1", "--out", str(tmp_path), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "1 already in the store, 0 to run" in result.output, result.output
