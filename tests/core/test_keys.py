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
