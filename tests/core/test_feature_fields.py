"""The cheap read-time check of a feature record (``store.feature_fields.problem``: the text of its per-target lists
and image grid, not parsed) agrees with parsing them on what the runner writes and on edits of each kind; what only
parsing finds (an MSE that is not the errors' mean) is ``lists_problem``'s."""

from __future__ import annotations

import json

import pytest
import torch

from vflpriv.runner.feature_attacking import examples
from vflpriv.store import feature_fields
from vflpriv.store.records import RunRecord


def _record(n: int = 12, shape=(1, 3, 4)) -> RunRecord:
    g = torch.Generator().manual_seed(0)
    attack, prior = torch.rand(n, generator=g), torch.rand(n, generator=g)
    images = [torch.rand(n, *shape, generator=g) for _ in range(3)]
    return RunRecord(key="k", method="splitnn", dataset="d", attack="fi-decoder", defense="none", phase="finetune",
                     strength=0.0, seed=0, secret="features", adversary="1", victim="0", status="ok", n_targets=n,
                     num_classes=10,
                     attack_errors=json.dumps(attack.tolist()), prior_errors=json.dumps(prior.tolist()),
                     feature_mse=float(attack.double().mean()), prior_mse=float(prior.double().mean()),
                     feature_examples=examples(*images))


def _grid(edit):
    def change(r: RunRecord) -> None:
        grid = json.loads(r.feature_examples)
        edit(grid)
        r.feature_examples = json.dumps(grid)
    return change


EDITS = {
    "errors with NaN": lambda r: setattr(r, "attack_errors", json.dumps([float("nan")] + json.loads(r.attack_errors)[1:])),
    "errors with null": lambda r: setattr(r, "prior_errors", json.dumps([None] + json.loads(r.prior_errors)[1:])),
    "errors with a boolean": lambda r: setattr(r, "prior_errors", json.dumps([True] + json.loads(r.prior_errors)[1:])),
    "errors nested": lambda r: setattr(r, "attack_errors", json.dumps([json.loads(r.attack_errors)])),
    "errors a string": lambda r: setattr(r, "attack_errors", json.dumps([str(v) for v in json.loads(r.attack_errors)])),
    "errors one short": lambda r: setattr(r, "attack_errors", json.dumps(json.loads(r.attack_errors)[1:])),
    "errors empty": lambda r: setattr(r, "attack_errors", "[]"),
    "MSE NaN": lambda r: setattr(r, "prior_mse", float("nan")),
    "grid row one short, another one long": _grid(lambda g: (g["attack"][1].append(g["attack"][0].pop()))),
    "grid row with NaN": _grid(lambda g: g["prior"][0].__setitem__(0, float("nan"))),
    "grid with a set missing a row": _grid(lambda g: g["truth"].pop()),
    "grid of another shape": _grid(lambda g: g.__setitem__("shape", [1, 4, 3 + 1])),
    "grid of a zero shape": _grid(lambda g: g.__setitem__("shape", [0, 3, 4])),
    "grid without its prior": _grid(lambda g: g.pop("prior")),
}


def test_a_record_as_the_runner_writes_it_checks_out():
    record = _record()
    assert feature_fields.problem(record) == "" and feature_fields.lists_problem(record) == ""
    assert RunRecord.from_json(record.to_json()).to_json() == record.to_json()


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_each_edit_is_found_without_parsing_the_lists(edit):
    record = _record()
    EDITS[edit](record)
    assert feature_fields.problem(record) != ""
    with pytest.raises(ValueError):
        RunRecord.from_json(record.to_json())


def test_an_mse_that_is_not_the_errors_mean_is_found_where_they_are_parsed():
    record = _record()
    record.feature_mse *= 1.5
    assert feature_fields.problem(record) == ""  # a finite number: the text check cannot tell
    assert feature_fields.lists_problem(record).startswith("its feature_mse (")
