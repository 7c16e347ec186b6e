"""Hostile input to the newest settings (feature attacks, canary labels, the audit's pairing, stores of several data):
each refused in planning with one ``error:`` line naming the valid choices, exit 2, nothing written; or, where it is
not an error, said rather than silently dropped."""

from __future__ import annotations

import dataclasses
import json
import os
from collections import Counter
from pathlib import Path

import pytest
from cli_helpers import one_error_line, wrote_nothing
from typer.testing import CliRunner

from vflpriv.cli import app

REFUSED = [
    # true/false read as 1 by pydantic: one canary, party 1, one epoch, one known sample
    (["--set", "partition.canaries=true"], "partition.canaries: got true/false where a number is expected"),
    (["--attack", "fi-decoder", "--set", "attack.adversary=true"], "got true/false where a number or 'server'"),
    # no party index nor 'server': named with the valid roles, not as pydantic's union branch "attack.adversary.int"
    (["--attack", "fi-decoder", "--set", "attack.adversary=1.5"],
     "attack.adversary=1.5: 1.5 is no role; give a party index (0: the active party, 1 and up: the passive parties)"),
    (["--attack", "fi-decoder", "--set", "attack.adversary=[1]"], "[1] is no role; give a party index (0: the active"),
    # a digit that is not ASCII ('²', Arabic-Indic) is no index: str.isdigit() alone took it, then pydantic's int branch
    (["--attack", "fi-decoder", "--set", "attack.adversary=\u00b2"], "is no role; give a party index (0: the active"),
    (["--attack", "fi-decoder", "--set", "attack.adversary=\u0661"], "is no role; give a party index (0: the active"),
    (["--attack", "fi-decoder", "--set", "partition.aux_features=true"], "partition.aux_features: got true/false"),
    (["--attack", "fi-decoder", "--set", "attack.options.epochs=false"], "attack.options.epochs: got true/false"),
    (["--defense", "iso", "--set", "finetune.epochs=true"], "finetune.epochs: got true/false"),
    # known victim features no attack reads: a label attack's trainings keyed anew (trained again) for nothing
    (["--attack", "mc", "--set", "partition.aux_features=5"],
     "partition.aux_features=5 is set, but no attack here reads it (mc infers labels; the feature attacks do: "),
    (["--attack", "mc,gc", "--set", "partition.aux_features=2"], "no attack here reads it (gc, mc infer labels;"),
    # canary labels that no canary reads
    (["--set", "partition.canary_labels=pair"], "partition.canary_labels=pair is set but partition.canaries is 0"),
    # known samples a feature attack cannot learn from (it failed after the training), or that leave no target
    (["--attack", "fi-decoder", "--set", "partition.aux_features=1"],
     "invalid partition.aux_features=1: Input should be greater than or equal to 2"),
    (["--attack", "grn", "--set", "partition.aux_features=200"], "leaving none to attack; use at most 199"),
    # the default share leaving one known sample on a tiny partition (it failed after the training)
    (["--attack", "fi-decoder", "--set", "dataset.name=breast-cancer", "--set", "dataset.max_samples=60", "--set",
      "partition.aligned_fraction=0.2", "--set", "partition.labeled=10", "--set", "partition.aux=2"],
     "at least 2 known samples; this partition leaves the adversary 1"),
    # fi-inversion's held-out step with too few known samples to withhold any (it ran the last step silently)
    (["--attack", "fi-inversion", "--set", "attack.options.stop=held-out", "--set", "partition.aux_features=2"],
     "fits on at least 2; this partition leaves the adversary 2; set partition.aux_features=3"),
    (["--attack", "fi-inversion", "--set", "attack.options.stop=held-out", "--set", "attack.tune=true", "--set",
      "partition.aux_features=3"], "in every tuning trial (which sees three quarters of them); this partition leaves"),
]

AUDIT_REFUSED = [
    # empty lists: read as every registered attack (more than the default battery) and as the default phases, where
    # --attacks "" and --phases "" are refused
    (["--set", "audit.attacks=[]"], "audit.attacks is empty; name attacks (bli, direction,"),
    (["--set", "audit.phases=[]"], "audit.phases is empty; name finetune, pretrain or both"),
    (["--attacks", "mc,gc", "--set", "partition.aux_features=2"], "partition.aux_features=2 is set, but no attack"),
    (["--set", "audit.feature_adversaries=[]"], "audit.feature_adversaries is empty, so the feature attacks"),
    (["--set", "audit.feature_adversaries=[active,active]"], "audit.feature_adversaries repeat: active"),
    (["--set", "audit.feature_defended=[bogus]"], "audit.feature_defended names bogus, not a feature attack of this "
                                                  "audit; its feature attacks: fi-decoder, fi-inversion, grn"),
    (["--set", "audit.feature_defended=[mc]"], "audit.feature_defended names mc, not a feature attack"),
    (["--attacks", "fi-decoder", "--set", "audit.feature_defended=[grn]"], "its feature attacks: fi-decoder"),
    (["--set", "audit.auditor=none", "--set", "audit.auditor_options.canary_inputs=crafted"],
     "audit.auditor_options is set but audit.auditor is none"),
    # the auditor's options named as the user gave them, not as the runs' finetune.auditor_options
    (["--set", "audit.auditor_options.menu=bogus"],
     "invalid audit.auditor_options.menu='bogus': Input should be 'standard' or 'fine'"),
    (["--set", "audit.auditor_options.bogus=1"],
     "unknown setting audit.auditor_options.bogus; valid keys here: canary_inputs, menu"),
]


@pytest.mark.parametrize(("args", "needle"), REFUSED, ids=[" ".join(a)[:60] for a, _ in REFUSED])
def test_evaluate_refuses_in_planning(args, needle, tmp_path, monkeypatch):
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    with wrote_nothing(tmp_path, Path(os.environ["VFLPRIV_CACHE"])):
        result = CliRunner().invoke(app, ["evaluate", *args, "--out", str(tmp_path / "out"), "--dry-run"])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, needle)


@pytest.mark.parametrize(("args", "needle"), AUDIT_REFUSED, ids=[" ".join(a)[:60] for a, _ in AUDIT_REFUSED])
def test_audit_refuses_in_planning(args, needle, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with wrote_nothing(tmp_path, Path(os.environ["VFLPRIV_CACHE"])):
        result = CliRunner().invoke(app, ["audit", "--method", "splitnn", "--quick", *args, "--dry-run"])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, needle)


def test_the_default_feature_defended_needs_no_feature_attack_in_the_audit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["audit", "--method", "splitnn", "--quick", "--attacks", "mc", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "judged under none" not in result.output  # the default battery's feature defenses: expected, not listed


def test_a_bool_is_still_a_bool():
    from vflpriv.config.schema import RunConfig

    assert RunConfig.model_validate({"finetune": {"curve": True}}).finetune.curve is True
    assert RunConfig.model_validate({"partition": {"canaries": 3}}).partition.canaries == 3


def test_an_audit_that_plants_no_canaries_refuses_canary_labels(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with wrote_nothing(tmp_path, Path(os.environ["VFLPRIV_CACHE"])):
        result = CliRunner().invoke(app, ["audit", "--method", "splitnn", "--quick", "--set",
                                          "partition.canary_labels=pair", "--set", "audit.canaries=0", "--dry-run"])
    assert result.exit_code == 2, result.output
    one_error_line(result.output,
                   "partition.canary_labels=pair needs the random-label canaries, but this audit plants none")


def test_the_audit_draws_pair_labels_where_it_plants_canaries_and_none_elsewhere():
    from vflpriv.workflows.audit import audit_grid
    from vflpriv.workflows.audit_config import AuditConfig

    cfg = AuditConfig.model_validate({"method": {"name": "splitnn"}, "partition": {"canary_labels": "pair"},
                                      "audit": {"profile": "quick", "attacks": ["mc"], "defenses": [{"name": "iso"}]}})
    runs, _ = audit_grid(cfg)
    drawn = Counter((r.partition.canaries > 0, r.partition.canary_labels) for r in runs)
    assert drawn[(True, "pair")] > 0 and drawn[(False, "uniform")] > 0  # the canary-free control
    assert set(drawn) == {(True, "pair"), (False, "uniform")}


def test_an_audit_defense_no_attack_is_judged_under_is_said_not_dropped():
    from vflpriv.workflows.audit import audit_grid
    from vflpriv.workflows.audit_config import AuditConfig

    cfg = AuditConfig.model_validate({"method": {"name": "splitnn"}, "audit": {
        "profile": "quick", "attacks": ["mc"], "defenses": [{"name": "embedding-dp"}, {"name": "iso"}]}})
    runs, skipped = audit_grid(cfg)
    assert {r.swept.name for r in runs if r.swept} == {"iso"}
    (said,) = [s for s in skipped if s.defense == "embedding-dp"]
    assert said.attack == "*" and "judged under none of this audit's attacks in finetune (mc)" in said.reason
    assert "it claims: features" in said.reason
    assert not [s for s in skipped if s.defense == "iso"]


def test_a_table_of_runs_on_different_data_warns(tmp_path):
    from dataclasses import replace

    from vflpriv.config.schema import RunConfig
    from vflpriv.config.sweep import ExperimentConfig
    from vflpriv.runner.execution import blank_record
    from vflpriv.store.records import RunRecord
    from vflpriv.store.sqlite import Store

    def record(seed: int, data: str) -> RunRecord:  # named by its settings, as the runner names it (review hunt H5)
        run = ExperimentConfig.model_validate({"attack": {"name": "mc"}, "strengths": [1.0],
                                               "seeds": [seed]}).runs()[0]
        return replace(blank_record(run), training_key=f"t{seed}", utility=0.8, attack_accuracy=0.3,
                       prior_accuracy=0.2, leakage=0.1, num_classes=10, utility_metric="accuracy",
                       data_fingerprint=data)

    for name, data in (("same", ""), ("other", "ab" * 32)):
        with Store(tmp_path / f"{name}.sqlite") as store:
            store.put_many([record(0, ""), record(1, data)])
        result = CliRunner().invoke(app, ["table", str(tmp_path / f"{name}.sqlite"), "--out", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
        warned = "were computed on 2 different data" in result.output
        assert warned == (name == "other"), result.output
    with Store(tmp_path / "parties.sqlite") as store:  # other parties, other fingerprint by design: no warning
        settings = [json.loads(record(seed, "").config) for seed in (0, 1)]
        for seed, run in enumerate(settings):
            run["partition"]["parties"] = 2 + seed
        store.put_many([dataclasses.replace(record(seed, "ab" * seed), config=json.dumps(settings[seed]),
                                            key=RunConfig.model_validate(settings[seed]).key())  # hunt3 P1
                        for seed in (0, 1)])
    result = CliRunner().invoke(app, ["table", str(tmp_path / "parties.sqlite"), "--out", str(tmp_path / "p")])
    assert result.exit_code == 0 and "different data" not in result.output, result.output
    assert "damaged" not in result.output, result.output


@pytest.mark.parametrize("labels", ["uniform", "pair"])
def test_canaries_on_a_one_class_dataset_are_refused_in_planning(labels, tiny):
    """A plugin's dataset of one class: a canary's label (of every class, or of a pair) would be no random draw."""
    import dataclasses

    from vflpriv.common.errors import IncompatibleError
    from vflpriv.config.registry import DATASETS
    from vflpriv.config.schema import DatasetConfig
    from vflpriv.data.load import load_dataset
    from vflpriv.runner.planning import plan

    digits = load_dataset(DatasetConfig(), parties=2)

    def one_class(*, parties=2, root=None, max_samples=None, seed=0):
        return dataclasses.replace(digits, name="one-class", y_train=digits.y_train * 0, y_test=digits.y_test * 0,
                                   num_classes=1)

    DATASETS.register("one-class", one_class)
    config = tiny(dataset={"name": "one-class"}, partition={"labeled": 100, "aux": 10, "canaries": 10,
                                                            "canary_labels": labels},
                  attack={"prior": "aux", "options": {"epochs": 2}})
    with pytest.raises(IncompatibleError, match="one-class has 1 class, so a canary's random label is no secret"):
        plan(config)


def test_a_grid_whose_control_cell_plants_no_canary_is_accepted(tmp_path, monkeypatch):
    """``partition.canary_labels: pair`` with a canaries axis holding 0 (the control) beside planted canaries is a valid
    grid: accepted, and its control cell is the same training as one without canary labels (one key)."""
    from vflpriv.config.schema import RunConfig

    monkeypatch.chdir(tmp_path)
    grid = tmp_path / "grid.yaml"
    grid.write_text("methods: [splitnn]\ndatasets: [digits]\nattack: {name: mc}\npartition: {canary_labels: pair}\n"
                    "axes:\n  partition.canaries: [0, 50]\nseeds: [0]\n")
    result = CliRunner().invoke(app, ["sweep", str(grid), "--out", str(tmp_path / "out"), "--dry-run"])
    assert result.exit_code == 0, result.output
    base = {"method": {"name": "splitnn"}, "dataset": {"name": "digits"}, "attack": {"name": "mc"}}
    control = RunConfig.model_validate({**base, "partition": {"canary_labels": "pair"}})
    assert control.key() == RunConfig.model_validate(base).key()
    planted = {"partition": {"canary_labels": "pair", "canaries": 50}}
    assert RunConfig.model_validate({**base, **planted}).key() != RunConfig.model_validate(
        {**base, "partition": {"canaries": 50}}).key()
