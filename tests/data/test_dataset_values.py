"""Review hunt3 P7: a dataset's non-finite features or labels outside 0..C-1 were not checked at load: a NaN was scored
where the seed's partition missed it and read as 'training diverged' where it did not, after training fully. Now
refused in planning, one error line naming the party, split, count and first position."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from vflpriv.config.registry import DATASETS
from vflpriv.data import embedded, load
from vflpriv.data.base import PartySpec, VerticalDataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_helpers import refused_in_planning  # noqa: E402


def _nan_at_party_0(d: VerticalDataset) -> None:
    d.x_train[0][0, 0, 0, 0] = float("nan")


def _inf_in_party_1_test(d: VerticalDataset) -> None:
    d.x_test[1][4:7, 0, 2, 1] = float("inf")


def _tabular_nan(d: VerticalDataset) -> None:
    d.x_train[1].view(d.x_train[1].shape[0], -1)[9, 5] = float("-inf")


def _label_out_of_range(d: VerticalDataset) -> None:
    d.y_train[3] = d.num_classes
    d.y_train[5] = -1


def _test_label_out_of_range(d: VerticalDataset) -> None:
    d.y_test[2] = d.num_classes + 3


CASES = [
    (_nan_at_party_0, "party 0's training features hold 1 non-finite value (first at row 0, position (0, 0, 0))"),
    (_inf_in_party_1_test, "party 1's test features hold 3 non-finite values (first at row 4, position (0, 2, 1))"),
    (_tabular_nan, "party 1's training features hold 1 non-finite value (first at row 9, column 5)"),
    (_label_out_of_range, "its training labels hold 2 values outside 0..9 (first at row 3: 10)"),
    (_test_label_out_of_range, "its test labels hold 1 value outside 0..9 (first at row 2: 13)"),
]


@pytest.mark.parametrize("spoil, needle", CASES, ids=[c[0].__name__ for c in CASES])
def test_spoiled_values_are_refused_at_load(spoil, needle, tmp_path, monkeypatch):
    d = embedded.load_digits()
    copy = VerticalDataset("t-values", tuple(x.clone() for x in d.x_train), d.y_train.clone(),
                           tuple(x.clone() for x in d.x_test), d.y_test.clone(), d.num_classes, d.specs,
                           fitted_features=("", ""))
    if spoil is _tabular_nan:  # the digits as 32 columns per party
        flat = [tuple(x.reshape(x.shape[0], -1) for x in xs) for xs in (copy.x_train, copy.x_test)]
        copy = VerticalDataset("t-values", flat[0], copy.y_train, flat[1], copy.y_test, d.num_classes,
                               (PartySpec("tabular", (32,)),) * 2, fitted_features=("", ""))
    spoil(copy)
    monkeypatch.setitem(DATASETS._extra, "t-values", lambda **kwargs: copy)
    load._load.cache_clear()
    try:
        out = refused_in_planning(["evaluate", "--dataset", "t-values", "--attack", "mc", "--defense", "none",
                                   "--seeds", "0", "--out", "o"], needle, tmp_path, monkeypatch)
    finally:
        load._load.cache_clear()
    assert "dataset 't-values' as its loader returned it:" in out
