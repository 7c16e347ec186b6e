"""Scores that need the targets' true labels, so only the runner computes them (REFERENCE.md §10, §12): an
attack's record (accuracy on the targets it covers, AUC, TPR at 1% FPR, per-target hits, the search's oracle), and

- Hungarian-matched accuracy of a clustering: the best one-to-one naming of clusters by labels
  (``scipy.optimize.linear_sum_assignment`` on the cluster x label contingency table), an upper bound
  on what any one-to-one naming chosen without the target labels can reach.
- Leak AUC (Li et al. 2022, §3): the ROC AUC of the scores within each received batch, averaged
  over the batches that hold both classes (a batch without a positive has no AUC).
- Accuracy at the best threshold on the scores: a reference number, optimistic by construction.
"""

from __future__ import annotations

import json
import math

import numpy as np
import torch

from vflpriv.attacks.search import SearchResult
from vflpriv.common import fdp_one_run, metrics
from vflpriv.common.empirical_epsilon import KEEP, kept, menu_lower
from vflpriv.common.errors import ProtocolError
from vflpriv.engine.adversary import Inference
from vflpriv.models.training import require_finite
from vflpriv.store.records import RunRecord


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


def hits(predictions: torch.Tensor, truth: torch.Tensor) -> str:
    """'1' where a guess is right, '0' where wrong, one character per target (for per-sample paired tests)."""
    return "".join("1" if h else "0" for h in (predictions == truth).tolist())


def record_search(record: RunRecord, found: SearchResult, truth: dict[str, torch.Tensor],
                  hidden: dict[str, torch.Tensor] | None = None) -> None:
    """The search's choice, its trials, and the oracle: the best accuracy on the targets' labels of anything it
    trained (every trial and the refit), an upper bound beside the honestly selected ``attack_accuracy``."""
    y = truth[record.attack_target]
    best = record.attack_accuracy
    for trial in found.trials:
        inf = trial.inferences.get(record.attack_target)
        if inf is not None:
            on = _scored(inf, record.attack_target, y.numel(), hidden)
            best = max(best, metrics.accuracy(inf.predictions[on], y[on]))
    record.attack_accuracy_oracle = best
    record.attack_selected = json.dumps(found.selected, sort_keys=True)
    record.attack_trials = json.dumps({"how": found.how, "trials": [t.summary() for t in found.trials]})


def _covered(inference: Inference, n: int) -> torch.Tensor:
    """The positions of a target set an inference guesses (all of them unless it says otherwise)."""
    if inference.covered is None:
        return torch.ones(n, dtype=torch.bool)
    covered = inference.covered.bool().cpu()
    if covered.shape != (n,) or not bool(covered.any()):
        raise ProtocolError(f"the attack's covered mask must be {n} booleans with at least one true")
    return covered


def _scored(inference: Inference, name: str, n: int, hidden: dict[str, torch.Tensor] | None) -> torch.Tensor:
    """The positions of target set ``name`` scored against true labels: those the inference guesses, less the hidden
    ones (random-label canaries, scored against their drawn labels by :func:`score_canaries`)."""
    on = _covered(inference, n)
    if hidden is not None and name in hidden:
        on = on & ~hidden[name]
        if not bool(on.any()):
            raise ProtocolError(f"every {name} target the attack guessed is a random-label canary: nothing is left to "
                                "score it on; lower partition.canaries")
    return on


def score_attack(record: RunRecord, inferences: dict[str, Inference], truth: dict[str, torch.Tensor],
                 hidden: dict[str, torch.Tensor] | None = None) -> torch.Tensor:
    """Score the inferences into ``record`` on the targets they cover (less the ``hidden`` positions); returns that
    mask of the primary set."""
    primary = "test" if "test" in inferences else "train"
    record.attack_target = primary
    for name, inf in inferences.items():
        if inf.scores is not None:
            require_finite(inf.scores, f"the attack's scores of its {name} targets")
        if inf.confidence is not None:
            require_finite(inf.confidence, f"the attack's confidence in its {name} guesses")
    if "train" in inferences:
        on = _scored(inferences["train"], "train", truth["train"].numel(), hidden)
        record.attack_accuracy_train = metrics.accuracy(inferences["train"].predictions.cpu()[on], truth["train"][on])
    inf, y = inferences[primary], truth[primary]
    covered = _scored(inf, primary, y.numel(), hidden)
    record.n_targets = int(covered.sum())
    predictions, y = inf.predictions.cpu()[covered], y[covered]
    record.attack_accuracy = metrics.accuracy(predictions, y)
    if inf.scores is not None:
        scores = inf.scores.cpu()[covered]
        record.attack_auc = metrics.auc(scores, y)
        record.attack_tpr_at_1fpr = metrics.tpr_at_fpr(scores, y, fpr=0.01)
        record.attack_accuracy_best_threshold = best_threshold_accuracy(scores, y)
    if inf.confidence is not None:
        record.attack_precision_top_k, record.attack_precision_top = precision_at_top(
            predictions, y, inf.confidence.cpu()[covered])
    if inf.per_epoch:
        record.attack_accuracy_optimistic = max(metrics.accuracy(pred.cpu()[covered], y) for pred in inf.per_epoch)
    if inf.clusters is not None:
        record.attack_accuracy_hungarian = hungarian_accuracy(inf.clusters.cpu()[covered], y)
    if inf.batch_scores:
        kept = hidden.get(primary) if hidden else None
        batches = inf.batch_scores if kept is None else [
            (pos[~kept[pos.cpu()].to(pos.device)], s[~kept[pos.cpu()].to(s.device)]) for pos, s in inf.batch_scores]
        record.attack_leak_auc = leak_auc(batches, truth[primary])
    return covered


#: The share of an attack's guesses whose precision is reported as its most confident (at least TOP_MIN of them).
TOP_SHARE, TOP_MIN = 0.05, 5


def precision_at_top(predictions: torch.Tensor, truth: torch.Tensor, confidence: torch.Tensor) -> tuple[int, float]:
    """(k, accuracy of the k most confident guesses), k the top :data:`TOP_SHARE` (at least :data:`TOP_MIN`): where a
    leak is concentrated on a few targets, this sees it when the mean accuracy averages it away (Carlini et al. 2022's
    TPR at low FPR, for multiclass guesses)."""
    k = min(predictions.numel(), max(TOP_MIN, math.ceil(TOP_SHARE * predictions.numel())))
    top = confidence.argsort(descending=True, stable=True)[:k]
    return k, metrics.accuracy(predictions[top], truth[top])


def odds_ratio(attack_hits: str, prior_hits: str) -> float:
    """The multiplicative advantage (Busa-Fekete et al. 2024): log of the attack's odds of a right guess over the
    features-only prior's on the same targets, each odds with add-half smoothing; on the epsilon scale (an
    epsilon-label-DP training moves a Bayes-optimal guesser's odds by at most e^eps), and an estimate, since neither
    guesser is Bayes-optimal."""
    n = len(attack_hits)
    a, b = (attack_hits.count("1") + 0.5) / (n + 1), (prior_hits.count("1") + 0.5) / (n + 1)
    return math.log(a / (1 - a)) - math.log(b / (1 - b))


def menu_counts(right: torch.Tensor, confidence: torch.Tensor | None, *, shares: tuple[float, ...] = KEEP
                ) -> list[list[int]]:
    """[kept, right] per entry of the canary audit's abstention menu ``shares`` (``empirical_epsilon.kept``): the most
    confident guesses first; without a confidence, every guess at once."""
    order = (confidence.argsort(descending=True, stable=True) if confidence is not None
             else torch.arange(right.numel()))
    sizes = kept(right.numel(), shares=shares) if confidence is not None else [right.numel()]
    return [[k, int(right[order[:k]].sum())] for k in sizes]


def score_canaries(record: RunRecord, inference: Inference, positions: torch.Tensor, labels: torch.Tensor, *,
                   classes: int, delta: float, prior: torch.Tensor | None) -> None:
    """The attack's guesses of the random-label canaries at ``positions`` of its train targets (``labels``: their
    drawn labels), and the empirical lower bound on the training's label-DP epsilon they certify
    (``vflpriv.common.empirical_epsilon``): with a confidence, every entry of the abstention menu (its most confident
    share of the guessed canaries); without, all of them. ``prior``: the prior's guesses of the same canaries."""
    guessed = _covered(inference, inference.predictions.numel())[positions]
    right = (inference.predictions.cpu()[positions] == labels)[guessed]
    if prior is not None:
        record.canary_prior_accuracy = metrics.accuracy(prior, labels)
    if not bool(guessed.any()):
        return
    confidence = inference.confidence.cpu()[positions][guessed] if inference.confidence is not None else None
    counts = menu_counts(right, confidence)
    bound, guesses = menu_lower(counts, canaries=record.canaries, classes=classes, delta=delta)
    chosen = next(c for c in counts if c[0] == guesses)  # menu_lower returns one of the entries' guesses
    record.canary_counts = json.dumps(counts)
    record.canary_guesses, record.canary_accuracy = chosen[0], chosen[1] / chosen[0]
    record.epsilon_lower, record.epsilon_lower_delta = bound, delta
    record.epsilon_fdp = fdp_one_run.menu_epsilon(counts, canaries=record.canaries, delta=delta, classes=classes)[0]
