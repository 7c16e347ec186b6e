"""The feature scores at their edges (the survivors of ``vflpriv/common/feature_metrics.py``'s mutation session): a
feature spanning less than 1 keeps its span, a guess is put back from a scale whose span is not 1, the discrete
columns are found among the columns (not the rows) and only the declared leading ones are categorical, and a snapped
guess exactly ``EXACT`` from the truth is no match (SecretFlow's strict ``< 1e-5``)."""

from __future__ import annotations

import torch

from vflpriv.common import feature_metrics as fm


def test_a_feature_spanning_less_than_one_is_scaled_by_its_own_span():
    x = torch.tensor([[0.0, 1.0], [0.5, 3.0]])
    low, span = fm.fit_scale(x, image=False)
    assert span.tolist() == [0.5, 2.0]
    assert fm.scaled(x, low, span).tolist() == [[0.0, 0.0], [1.0, 1.0]]


def test_rescaled_puts_a_guess_from_one_fitted_scale_onto_another():
    source = fm.fit_scale(torch.tensor([[1.0], [5.0]]), image=False)  # low 1, span 4
    target = fm.fit_scale(torch.tensor([[0.0], [2.0]]), image=False)  # low 0, span 2
    # 0.25 on the source scale is 1 + 0.25 * 4 = 2 in raw units, which is 1.0 on the target scale
    assert fm.rescaled(torch.tensor([[0.25]]), source, target).tolist() == [[1.0]]


def test_discrete_levels_are_found_per_column_and_only_the_leading_declared_columns_are_categorical():
    rows = torch.tensor([[2.0, 0.2, 0.0, 0.1], [1.0, 0.7, 1.0, 0.4]])  # 2 rows, 4 columns: every column has 2 values
    assert sorted(fm.discrete_levels(rows, categorical=0)) == [0, 1, 2, 3]
    codes = torch.tensor([[2.0, 0.2, 0.0], [1.0, 0.7, 1.0], [0.0, 0.9, 1.0]])  # col 0 codes, col 1 numeric, col 2 binary
    assert sorted(fm.discrete_levels(codes, categorical=1)) == [0, 2]


def test_a_snapped_guess_exactly_exact_away_from_the_truth_is_no_match():
    levels = {0: torch.tensor([fm.EXACT, 1.0])}
    mean, rates = fm.exact_match(torch.tensor([[0.0]]), torch.tensor([[0.0]]), levels)  # snapped to EXACT, truth 0
    assert rates == [0.0] and mean == 0.0
