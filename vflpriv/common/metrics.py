"""Scores: utility (accuracy / AUC / F1) and attack performance, computed only by the runner."""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch


def accuracy(predictions: torch.Tensor, labels: torch.Tensor) -> float:
    return float((predictions.cpu() == labels.cpu()).double().mean()) if labels.numel() else float("nan")


def auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """ROC AUC of positive-class scores; NaN when only one class is present."""
    from sklearn.metrics import roc_auc_score  # binary tasks only: scikit-learn is imported when needed

    y = labels.cpu().numpy()
    if len(np.unique(y)) < 2:
        return float("nan")
    return float(roc_auc_score(y, scores.detach().cpu().double().numpy()))


def tpr_at_fpr(scores: torch.Tensor, labels: torch.Tensor, *, fpr: float = 0.01) -> float:
    """True-positive rate at the given false-positive rate (interpolated on the ROC curve)."""
    from sklearn.metrics import roc_curve

    y = labels.cpu().numpy()
    if len(np.unique(y)) < 2:
        return float("nan")
    f, t, _ = roc_curve(y, scores.detach().cpu().double().numpy())
    return float(np.interp(fpr, f, t))


def f1(predictions: torch.Tensor, labels: torch.Tensor) -> float:
    from sklearn.metrics import f1_score

    return float(f1_score(labels.cpu().numpy(), predictions.cpu().numpy(), average="binary"))


#: Task utility from logits: top-1 accuracy, AUC of the positive class, or binary F1.
UTILITIES: dict[str, Callable[[torch.Tensor, torch.Tensor], float]] = {
    "accuracy": lambda logits, labels: accuracy(logits.argmax(1), labels),
    "auc": lambda logits, labels: auc(torch.softmax(logits.double(), dim=1)[:, 1], labels),
    "f1": lambda logits, labels: f1(logits.argmax(1), labels),
}


def utility(metric: str, logits: torch.Tensor, labels: torch.Tensor) -> float:
    """The task's utility (``UTILITIES[metric]``) of ``logits`` against ``labels``: one row of logits per label (a
    mismatch would broadcast into a number about other rows)."""
    if logits.shape[0] != labels.shape[0]:
        raise ValueError(f"{logits.shape[0]} rows of logits for {labels.shape[0]} labels")
    return UTILITIES[metric](logits, labels)
