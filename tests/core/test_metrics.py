"""The metrics every score is computed with, by hand: accuracy, ROC AUC (the Mann-Whitney statistic), the true-positive
rate at a false-positive rate (the ROC curve's points, interpolated), binary F1, and the utility read from logits."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from vflpriv.common import metrics


def test_accuracy_is_the_share_of_equal_entries_and_nan_without_labels():
    assert metrics.accuracy(torch.tensor([1, 0, 2, 2]), torch.tensor([1, 1, 2, 0])) == 0.5
    assert metrics.accuracy(torch.tensor([3]), torch.tensor([3])) == 1.0
    assert math.isnan(metrics.accuracy(torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long)))


def _mann_whitney(scores: list[float], labels: list[int]) -> float:
    pos = [s for s, y in zip(scores, labels) if y == 1]
    neg = [s for s, y in zip(scores, labels) if y == 0]
    return sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg) / (len(pos) * len(neg))


@pytest.mark.parametrize("scores, labels", [
    ([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]),
    ([0.9, 0.2, 0.2, 0.7, 0.1, 0.2], [0, 1, 0, 1, 1, 0]),  # ties count one half
    ([0.3, 0.1], [1, 0]),
])
def test_auc_is_the_share_of_positive_negative_pairs_ranked_right(scores, labels):
    assert metrics.auc(torch.tensor(scores), torch.tensor(labels)) == pytest.approx(_mann_whitney(scores, labels))


def test_auc_and_tpr_are_nan_with_one_class_present_and_say_nothing():
    """An attack scored on one class is undefined, quietly: no warning or error of the library (which, depending on
    its version, raises or warns on one class) reaches the user."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for labels in ([1, 1], [0, 0]):
            assert math.isnan(metrics.auc(torch.tensor([0.2, 0.9]), torch.tensor(labels)))
            assert math.isnan(metrics.tpr_at_fpr(torch.tensor([0.2, 0.9]), torch.tensor(labels), fpr=0.5))


def _tpr_at(scores: np.ndarray, labels: np.ndarray, fpr: float) -> float:
    """The ROC curve's points at every threshold (from (0, 0)), linearly interpolated at ``fpr``."""
    points = [(0.0, 0.0)] + [(float((scores[labels == 0] >= t).mean()), float((scores[labels == 1] >= t).mean()))
                             for t in sorted(set(scores.tolist()), reverse=True)]
    return float(np.interp(fpr, [f for f, _ in points], [t for _, t in points]))


@pytest.mark.parametrize("fpr", [0.0, 0.01, 0.1, 0.25, 0.5, 1.0])
def test_tpr_at_fpr_interpolates_the_roc_curve(fpr):
    rng = np.random.default_rng(0)
    labels = np.array([0] * 200 + [1] * 50)
    scores = np.round(rng.normal(labels * 1.5, 1.0), 2)  # rounded: ties between classes
    got = metrics.tpr_at_fpr(torch.tensor(scores), torch.tensor(labels), fpr=fpr)
    assert got == pytest.approx(_tpr_at(scores, labels, fpr))


def test_tpr_at_fpr_is_taken_at_one_percent_unless_told():
    rng = np.random.default_rng(1)
    labels = np.array([0] * 300 + [1] * 100)
    scores = rng.normal(labels * 2.0, 1.0)
    at_one = metrics.tpr_at_fpr(torch.tensor(scores), torch.tensor(labels))
    assert at_one == pytest.approx(_tpr_at(scores, labels, 0.01))
    assert at_one < metrics.tpr_at_fpr(torch.tensor(scores), torch.tensor(labels), fpr=0.2)


def test_f1_of_the_positive_class_by_hand():
    predictions, labels = torch.tensor([1, 1, 0, 1, 0, 0, 1]), torch.tensor([1, 0, 0, 1, 1, 0, 0])
    tp, fp, fn = 2, 2, 1
    precision, recall = tp / (tp + fp), tp / (tp + fn)
    assert metrics.f1(predictions, labels) == pytest.approx(2 * precision * recall / (precision + recall))


def test_utilities_read_logits_row_by_row():
    logits = torch.tensor([[2.0, 1.0], [0.0, 3.0], [1.0, 1.5], [-5.0, -2.0], [4.0, 5.0]])
    labels = torch.tensor([0, 1, 0, 1, 1])
    assert metrics.utility("accuracy", logits, labels) == pytest.approx(4 / 5)  # argmax per row: 0, 1, 1, 1, 1
    # AUC of the positive class's probability per row, sigmoid(l1 - l0) of -1, 3, 0.5, 3, 1: every positive above every
    # negative (a softmax down the column, increasing in l1 alone, ranks row 3 last: 4 of 6 pairs)
    margin = (logits[:, 1] - logits[:, 0]).tolist()
    assert metrics.utility("auc", logits, labels) == pytest.approx(_mann_whitney(margin, labels.tolist())) == 1.0
    assert metrics.utility("auc", logits, labels) != pytest.approx(
        _mann_whitney(logits[:, 1].tolist(), labels.tolist()))
    assert metrics.utility("f1", logits, labels) == pytest.approx(metrics.f1(torch.tensor([0, 1, 1, 1, 1]), labels))


def test_a_utility_of_logits_for_other_rows_than_the_labels_is_refused():
    with pytest.raises(ValueError, match="2 rows of logits for 3 labels"):
        metrics.utility("accuracy", torch.zeros(2, 2), torch.zeros(3, dtype=torch.long))
