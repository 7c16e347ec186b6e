"""A grid's axis that lists a value twice is refused, as repeated methods, attacks, strengths and seeds are: its cells
were expanded twice and kept once, so the grid ran fewer cells than it listed."""

from __future__ import annotations

import re

import pytest

from vflpriv.common.errors import ConfigError
from vflpriv.tradeoff.grid import experiments

GRID = {"methods": ["splitnn"], "attacks": ["fi-decoder"], "seeds": [0]}


def test_an_axis_value_given_twice_is_refused():
    with pytest.raises(ConfigError, match=r"^grid file: axes partition.aux_features repeats 5; give each value once$"):
        experiments({**GRID, "axes": {"partition.aux_features": [5, 10, 5]}})


def test_distinct_axis_values_each_make_a_cell():
    cells = experiments({**GRID, "axes": {"partition.aux_features": [5, 10]}})
    assert [c.partition.aux_features for c in cells] == [5, 10]


@pytest.mark.parametrize(("key", "values", "needle"), [
    ("partition.aux_features", [5, 5.0], "partition.aux_features (5 and 5.0)"),
    ("finetune.lr", [0.001, "1e-3"], "finetune.lr (0.001 and '1e-3')"),
])
def test_one_value_in_two_spellings_is_refused_once_validated(key, values, needle):
    """Review lo3 F2: the check compared the values as written, so [5, 5.0] (or YAML's string '1e-3' beside 0.001)
    passed and the grid ran one cell for two."""
    with pytest.raises(ConfigError, match="^grid file: axes " + re.escape(needle) + " give the same setting twice"):
        experiments({**GRID, "axes": {key: values}})


def test_one_method_in_two_spellings_is_refused_by_what_repeats():
    """Review last2 R2: the message named "axes values" for a grid without axes."""
    with pytest.raises(ConfigError, match="^grid file: two methods or datasets give the same setting twice"):
        experiments({**GRID, "methods": ["splitnn", {"name": "splitnn"}]})


def test_one_attack_as_a_name_and_as_a_list_of_one_is_one_cell():
    """Review last3 F3: attack.name [mc] stayed a list in the cell's dump, so this axis passed as two cells."""
    with pytest.raises(ConfigError, match=re.escape("grid file: axes attack.name ('mc' and ['mc']) give the same")):
        experiments({"methods": ["splitnn"], "seeds": [0], "axes": {"attack.name": ["mc", ["mc"]]}})
