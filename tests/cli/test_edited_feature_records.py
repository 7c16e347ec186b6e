"""``vflpriv table`` and ``vflpriv report`` on a store whose feature records were edited by hand: a record that no run
writes (a NaN MSE, per-target errors that are not a list of one number per target, an unknown secret, a victim on a
label record, a label record relabelled as a feature one, an unreadable image grid) is left out with a warning naming
it, the rest is reported, no traceback, and the store is not written. An edit only parsing the per-target errors finds
(an MSE that is not their mean, an error that overflows) is one error line naming the run where they are parsed."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vflpriv.cli import app


EVALUATE = ["evaluate", "--method", "splitnn", "--attack", "mc,fi-decoder", "--strengths", "0,5", "--seeds", "0",
            "--set", "partition.labeled=60", "--set", "partition.aux=20", "--set", "finetune.epochs=1",
            "--set", "attack.prior=none", "--set", "attack.options.fi-decoder.epochs=3"]


@pytest.fixture(scope="module")
def both_secrets(tmp_path_factory) -> Path:
    """A real store of 4 runs: mc and fi-decoder on one training per strength (0, 5), seed 0, digits halves."""
    out = tmp_path_factory.mktemp("both")
    result = CliRunner().invoke(app, [*EVALUATE, "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out / "results.sqlite"


def _features(r: dict) -> bool:
    return r.get("secret") == "features"


EDITS = {
    "feature_mse NaN": (_features, lambda r: r.update(feature_mse=None), "its feature_mse (nan) is not the mean"),
    "feature_mse removed": (_features, lambda r: r.pop("feature_mse"), "its feature_mse (nan) is not the mean"),
    "attack_errors not JSON": (_features, lambda r: r.update(attack_errors="[oops"),
                               "its attack_errors is not a JSON list of finite numbers"),
    "attack_errors too short": (_features, lambda r: r.update(attack_errors="[0.1, 0.2]"),
                                "its attack_errors holds 2 values for"),
    "prior_errors with NaN": (_features, lambda r: r.update(prior_errors=json.dumps(
        [None] + json.loads(r["prior_errors"])[1:])), "its prior_errors is not a JSON list of finite numbers"),
    "unknown secret": (_features, lambda r: r.update(secret="passwords"),
                       "its secret is 'passwords'; a record's secret is labels or features"),
    "victim on a label record": (lambda r: not _features(r), lambda r: r.update(victim="1"),
                                 "a label record names a victim ('1')"),
    "label record relabelled": (lambda r: not _features(r), lambda r: r.update(secret="features", victim="0"),
                                "its attack_errors is not a JSON list of finite numbers"),
    "image grid unreadable": (_features, lambda r: r.update(feature_examples="{oops"),
                              "its feature_examples is not the image grid's JSON"),
    "config not JSON": (_features, lambda r: r.update(config="{oops"), "its config is not a JSON object"),
    "status unknown": (_features, lambda r: r.update(status="weird"), "its status is 'weird'; a record's status is ok"),
    "phase unknown": (_features, lambda r: r.update(phase="midtrain"), "its phase is 'midtrain'; a record's phase is"),
    "victim not a party": (_features, lambda r: r.update(victim="bob"), "its adversary '0' or victim 'bob' is not a"),
    "attack accuracy above 1": (lambda r: not _features(r), lambda r: r.update(attack_accuracy=1.5),
                                "its attack_accuracy (1.5) is outside [0, 1]"),
    "label hits not 0 or 1": (lambda r: not _features(r), lambda r: r.update(attack_hits="2" * len(r["attack_hits"])),
                              "its attack_hits is not one 0 or 1 per target"),
    "label hits of another length": (lambda r: not _features(r), lambda r: r.update(attack_hits=r["attack_hits"][:-3]),
                                     "its attack_hits holds"),
    "victim the adversary": (_features, lambda r: r.update(victim="0"), "its adversary is its victim (party 0)"),
    "image grid of another shape": (_features, lambda r: r.update(feature_examples=json.dumps(
        {**json.loads(r["feature_examples"]), "shape": [1, 8, 5]})), "its feature_examples is not the image grid's"),
    "a negative squared error, the means kept": (_features, lambda r: _negated_first_error(r),
                                                 "its attack_errors holds a negative number"),
    "utility above 1": (_features, lambda r: r.update(utility=1.7), "its utility (1.7) is outside [0, 1]"),
    "utility infinite": (_features, lambda r: r.update(utility="-inf"), "its utility (-inf) is outside [0, 1]"),
    "epsilon_features negative": (_features, lambda r: r.update(epsilon_features=-3.0),
                                  "epsilon_features is -3.0, below 0"),
    "epsilon_features_delta above 1": (_features, lambda r: r.update(epsilon_features_delta=7.0),
                                       "epsilon_features_delta is 7.0, outside [0, 1]"),
}


def _negated_first_error(r: dict) -> None:
    """The first target's squared error made negative, with the MSE and leakage that mean implies (a consistent edit
    that a mean check alone cannot see)."""
    errors = json.loads(r["attack_errors"])
    errors[0] = -errors[0] - 1.0
    r.update(attack_errors=json.dumps(errors), feature_mse=sum(errors) / len(errors))
    r.update(leakage=r["prior_mse"] - r["feature_mse"])


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


#: Every edit through ``table``; through ``report`` (slower, it reads the same records) those that crashed it.
CASES = [(edit, "table") for edit in sorted(EDITS)] + [("image grid unreadable", "report"),
                                                       ("image grid of another shape", "report"),
                                                       ("attack_errors not JSON", "report"),
                                                       ("config not JSON", "report")]


@pytest.mark.parametrize(("edit", "command"), CASES)
def test_an_edited_feature_record_is_left_out_with_a_warning_and_the_rest_reported(edit, command, tmp_path,
                                                                                   both_secrets):
    which, change, needle = EDITS[edit]
    store = tmp_path / "r.sqlite"
    store.write_bytes(both_secrets.read_bytes())
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT key, record FROM runs ORDER BY key").fetchall()
        key, record = next((k, json.loads(r)) for k, r in rows if which(json.loads(r)) and json.loads(r)["status"] == "ok")
        change(record)
        db.execute("UPDATE runs SET record = ? WHERE key = ?", (json.dumps(record), key))
    before = _digest(store)
    result = CliRunner().invoke(app, [command, str(store), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and _digest(store) == before
    assert f"warning: damaged record left out: run {key}: {needle}" in result.output, result.output
    rows = (tmp_path / "o" / "strength_rows.csv").read_text()
    assert "mc" in rows and "fi-decoder" in rows  # the other runs of both secrets are reported


def test_a_resumed_sweep_recomputes_an_edited_feature_record_to_its_true_numbers(tmp_path, both_secrets):
    out = tmp_path / "out"
    out.mkdir()
    store = out / "results.sqlite"
    store.write_bytes(both_secrets.read_bytes())
    with sqlite3.connect(store) as db:
        key, text = next((k, r) for k, r in db.execute("SELECT key, record FROM runs ORDER BY key")
                         if json.loads(r)["secret"] == "features")
        true = json.loads(text)
        db.execute("UPDATE runs SET record = ? WHERE key = ?", (json.dumps({**true, "feature_mse": 0.5}), key))
    result = CliRunner().invoke(app, [*EVALUATE, "--out", str(out)])
    assert result.exit_code == 0, result.output
    with sqlite3.connect(store) as db:
        (again,) = db.execute("SELECT record FROM runs WHERE key = ?", (key,)).fetchone()
    assert json.loads(again)["feature_mse"] == true["feature_mse"]


#: Edits only parsing the per-target errors finds: found where the leakage test parses them (a store read checks what
#: is cheap), one error line naming the run, nothing written.
DEEP_EDITS = {
    "feature_mse edited": (lambda r: r.update(feature_mse=r["feature_mse"] / 2),
                           "its feature_mse (0.0"),
    "an attack error edited": (lambda r: r.update(attack_errors=json.dumps([0.5] + json.loads(r["attack_errors"])[1:])),
                               "its feature_mse ("),
    "a prior error overflowing": (lambda r: r.update(prior_errors="[1e999" + r["prior_errors"][
        r["prior_errors"].index(","):]), "its prior_errors is not a JSON list of finite numbers"),
}


@pytest.mark.parametrize("edit", sorted(DEEP_EDITS))
def test_a_deep_edit_of_a_feature_record_is_one_error_naming_the_run(edit, tmp_path, both_secrets):
    change, needle = DEEP_EDITS[edit]
    store = tmp_path / "r.sqlite"
    store.write_bytes(both_secrets.read_bytes())
    with sqlite3.connect(store) as db:
        key, record = next((k, json.loads(r)) for k, r in db.execute("SELECT key, record FROM runs ORDER BY key")
                           if _features(json.loads(r)) and json.loads(r)["status"] == "ok")
        change(record)
        db.execute("UPDATE runs SET record = ? WHERE key = ?", (json.dumps(record), key))
    before = _digest(store)
    result = CliRunner().invoke(app, ["table", str(store), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "Traceback" not in result.output and _digest(store) == before
    assert f"error: the stored record of run {key} is damaged: {needle}" in result.output, result.output
    assert "--overwrite" in result.output
