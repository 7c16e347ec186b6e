"""Review var F4: a defense's kinds written two ways of one run were two rows: a label defense's own kinds given
(``label-dp`` ``kinds=[labels]``) beside them left out, and kinds in another order (``iso`` ``[gradient, embedding]``
beside ``[embedding, gradient]``: the defense holds them as a set). The first is also one key now (a default given);
the second keeps its two keys (neither is the default: their stored runs resume as they did)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from vflpriv.config.keys import config_hash, keyed
from vflpriv.config.schema import RunConfig
from vflpriv.config.sweep import ExperimentConfig
from vflpriv.reports.results import load_results
from vflpriv.runner.execution import blank_record
from vflpriv.store.sqlite import Store


def _runs(defense: dict, seeds: tuple) -> list[RunConfig]:
    return ExperimentConfig.model_validate({"defenses": [{"sweep": True, **defense}], "strengths": [1.0],
                                            "seeds": list(seeds)}).runs()


def _rows(tmp_path: Path, first: dict, second: dict) -> list:
    """(variant, seeds) per row of a store holding seeds 0, 1 of ``first`` and 1, 2 of ``second``, each record written
    as the earlier code wrote it (its kinds as given, under the key they had)."""
    store = Store(tmp_path / "results.sqlite")
    for defense, seeds in ((first, (0, 1)), (second, (1, 2))):
        for run in _runs(defense, seeds):
            config = json.loads(run.recorded())
            config["defenses"][0]["kinds"] = defense.get("kinds")
            key = run.key() if "kinds" not in defense else config_hash(keyed(  # as the earlier code keyed them
                {k: v for k, v in json.loads(json.dumps(config)).items() if k != "device"}))
            store.put(replace(blank_record(run), key=key, config=json.dumps(config), status="ok", utility=0.8,
                              attack_accuracy=0.6, prior_accuracy=0.5, num_classes=10))
    frame = load_results(tmp_path)
    return sorted(frame.groupby("variant")["seed"].nunique().to_dict().items())


@pytest.mark.parametrize("first, second", [
    ({"name": "label-dp", "kinds": ["labels"]}, {"name": "label-dp"}),
    ({"name": "alibi", "kinds": ["labels"]}, {"name": "alibi"}),
    ({"name": "iso", "kinds": ["gradient", "embedding"]}, {"name": "iso", "kinds": ["embedding", "gradient"]}),
])
def test_kinds_written_two_ways_of_one_run_are_one_row(tmp_path, first, second):
    assert _rows(tmp_path, first, second) == [("", 3)]


def test_a_label_defense_s_own_kinds_given_are_its_key_left_out_and_other_kinds_keep_theirs():
    def run(**defense):
        return _runs({"name": "label-dp", **defense}, (0,))[0]

    assert run(kinds=["labels"]).key() == run().key() and run(kinds=["labels"]).defenses[0].kinds is None
    iso = [_runs({"name": "iso", "kinds": kinds}, (0,))[0] for kinds in (["gradient", "embedding"],
                                                                         ["embedding", "gradient"])]
    assert iso[0].key() != iso[1].key()  # neither is iso's default: as written, so stored runs of either resume
    assert _runs({"name": "iso", "kinds": ["gradient"]}, (0,))[0].defenses[0].kinds == ["gradient"]  # method-bound
