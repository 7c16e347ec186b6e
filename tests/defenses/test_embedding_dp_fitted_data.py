"""Review fe F1: no feature epsilon on a victim whose features pass a preprocessing fitted on the training rows (one
sample's raw features move every row), nor on a dataset that does not say; fixed scalings keep the claim."""

from __future__ import annotations

import numpy as np
import pytest

from vflpriv.config.registry import DATASETS
from vflpriv.data import embedded
from vflpriv.data.base import VerticalDataset
from vflpriv.runner.planning import plan

DP = {"name": "embedding-dp", "strength": 1.0}


def _embedding_dp(tiny, dataset: str) -> str:
    """Why embedding-dp's training epsilon is withheld on ``dataset`` as planned ('' where it is claimed)."""
    data = {"dataset": {"name": dataset}}
    if dataset == "breast-cancer":
        data["partition"] = {"labeled": 80, "aux": 20}
    (d,) = plan(tiny(defenses=[DP], **data)).defenses
    return d.uncovered


def test_standardised_features_record_no_feature_epsilon_and_fixed_scalings_keep_it(tiny):
    assert _embedding_dp(tiny, "digits") == ""
    assert "standardised with the training rows' mean and std" in _embedding_dp(tiny, "breast-cancer")


def test_a_dataset_declaring_no_preprocessing_gets_no_feature_epsilon(tiny):
    def undeclared(**kwargs) -> VerticalDataset:
        d = embedded.load_digits(**kwargs)
        return VerticalDataset(d.name, d.x_train, d.y_train, d.x_test, d.y_test, d.num_classes, d.specs)

    DATASETS.register("test-undeclared", undeclared)
    try:
        assert "declares no fitted_features" in _embedding_dp(tiny, "test-undeclared")
    finally:
        DATASETS._extra.pop("test-undeclared")


@pytest.mark.parametrize("name", ["digits", "breast-cancer"])
def test_a_loader_declaring_no_fitted_preprocessing_moves_one_row_per_changed_sample(name, monkeypatch):
    """One raw value of one training sample changed: where a party's features are declared unfitted, only that
    sample's row of that party moves; where they move more rows, the declaration names the preprocessing."""
    load, read = getattr(embedded, f"load_{name.replace('-', '_')}"), embedded._read
    base = load()

    def changed(*args):
        data, target = read(*args)
        trained = embedded._split(np.arange(len(target))[:, None], target, None, 0)[0]
        data = data.copy()
        data[int(trained[0, 0]), -1] += 5.0  # a training sample's last column: the last party's block
        return data, target

    monkeypatch.setattr(embedded, "_read", changed)
    moved = load()
    rows = [int((m != b).flatten(1).any(1).sum()) for m, b in zip(moved.x_train, base.x_train)]
    assert rows[:-1] == [0] * (len(rows) - 1) and rows[-1] >= 1
    assert (rows[-1] == 1) == (base.fitted_features[-1] == ""), (name, rows, base.fitted_features)
