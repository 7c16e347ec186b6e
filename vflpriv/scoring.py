"""Scores that need the targets' true labels, so only the runner computes them (REFERENCE.md §10, §12).

- Hungarian-matched accuracy of a clustering: the best one-to-one naming of clusters by labels
  (``scipy.optimize.linear_sum_assignment`` on the cluster x label contingency table), an upper bound
  on what any one-to-one naming chosen without the target labels can reach.
- Leak AUC (Li et al. 2022, §3): the ROC AUC of the scores within each received batch, averaged
  over the batches that hold both classes (a batch without a positive has no AUC).
- Accuracy at the best threshold on the scores: a reference number, optimistic by construction.
"""

from __future__ import annotations

import numpy as np
import torch

from vflpriv import metrics


def hungarian_accuracy(clusters: torch.Tensor, labels: torch.Tensor) -> float:
    """Accuracy of the best one-to-one map from cluster indices to labels."""
    from scipy.optimize import linear_sum_assignment  # only for clustering attacks

    c = clusters.cpu().long().numpy()
    y = labels.cpu().long().numpy()
    if y.size == 0:
        return float("nan")
    table = np.zeros((c.max() + 1, y.max() + 1), dtype=np.int64)
    np.add.at(table, (c, y), 1)
    rows, cols = linear_sum_assignment(table, maximize=True)
    return float(table[rows, cols].sum() / y.size)


def leak_auc(batch_scores: list[tuple[torch.Tensor, torch.Tensor]], labels: torch.Tensor) -> float:
    """Mean over batches with both classes of the within-batch ROC AUC (NaN when there is none)."""
    aucs = [metrics.auc(scores, labels[positions.cpu()]) for positions, scores in batch_scores]
    aucs = [a for a in aucs if not np.isnan(a)]
    return float(np.mean(aucs)) if aucs else float("nan")


def best_threshold_accuracy(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """max over thresholds t of accuracy of (score > t -> class 1), t ranging over all cut points."""
    s = scores.detach().cpu().double().numpy()
    y = labels.cpu().numpy() == 1
    if y.size == 0:
        return float("nan")
    order = np.argsort(s, kind="stable")
    s, y = s[order], y[order]
    # cutting after position i: rows <= i predicted 0, rows > i predicted 1; only between distinct scores
    negatives_below = np.concatenate([[0], np.cumsum(~y)])
    positives_above = y.sum() - np.concatenate([[0], np.cumsum(y)])
    valid = np.concatenate([[True], s[1:] != s[:-1], [True]])
    return float(((negatives_below + positives_above)[valid]).max() / y.size)
