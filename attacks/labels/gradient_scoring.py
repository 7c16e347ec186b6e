"""Norm and direction scoring (Li et al. 2022, "Label Leakage and Protection in Two-party Split
Learning", ICLR 2022; REFERENCE.md §10), binary tasks only.

- ``norm``: score_i = ||g_i||_2 as the score of the class with the larger gradients. Li et al. score the
  positive class 1 (their premise: it is rare, so the model is less sure of it and its gradients are
  larger). Which class has the larger gradients depends on the task and the model: with
  ``larger_norm_class=auto`` (default) an adversary that received gradients of its auxiliary samples
  (``partition.aux_source=labeled``) orients the score by them; otherwise it keeps Li et al.'s class 1.
  ``0`` or ``1`` fixes it. Predictions: 2-means on log ||g_i|| (norms spread over orders of magnitude),
  the large-norm cluster is that class. Per-sample default: the last epoch's gradient (the confidence
  gap Li et al. rely on grows with training).
- ``direction``: score_i = cos(g_i, g_ref) with g_ref the received gradient of one sample known to be
  positive (class 1); Li et al. assume the adversary knows one such training sample. The adversary's
  known positives are its auxiliary ones. With ``partition.aux_source=labeled`` they are labeled
  training samples whose gradients it receives: g_ref is an auxiliary positive's gradient from the
  same batch, else from the nearest batch in time (the top model moves slowly, and for a binary
  softmax head every row of a batch lies on one line, its side set by the label). With the default
  ``aux_source=unlabeled`` no auxiliary gradient is ever received; the fallback reference is the batch
  member that the adversary's own model completion proxy (bottom model + Linear head fitted on its
  auxiliary labels, as ``mc``) rates most likely positive. Predictions: cos > 0 is class 1.

Each received batch gives the runner one (positions, scores) pair for Li et al.'s leak AUC (per batch,
averaged over the batches holding both classes). One score per target (for accuracy, AUC, TPR at 1%
FPR) comes from the chosen epoch(s) as in :mod:`vflpriv.attacks.labels.gradients` (norm: last; direction: mean of
the cosines over epochs, scale-free).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field

from vflpriv.attacks.base import AdversaryView, Inference
from vflpriv.attacks.labels.gradients import EpochChoice, GradientAttack, GradientBatch, per_sample, positions_in
from vflpriv.attacks.labels.model_completion import proxy_positive
from vflpriv.config.options import Options
from vflpriv.models.kmeans import kmeans


class NormOptions(Options):
    gradients_from: EpochChoice = Field("last", description="each sample's score from its first or last epoch, or the mean")
    larger_norm_class: Literal[0, 1, "auto"] = Field(
        "auto",
        description="the class with the larger gradient norms: auto = the class whose received auxiliary "
        "gradients have the larger mean log-norm, else 1 (Li et al.: the rare positive class)",
    )


class DirectionOptions(Options):
    gradients_from: EpochChoice = Field("mean", description="each sample's score from its first or last epoch, or the mean")
    proxy_epochs: int = Field(300, ge=1, description="epochs of the proxy head choosing a fallback reference")


def scored_inference(
    batches: list[GradientBatch], scores: list[torch.Tensor], *, n: int, epochs: EpochChoice
) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
    """Per-target scores (reduced over epochs) and the (positions, scores) pair of every received batch,
    given one score per row of each batch."""
    scored = [dataclasses.replace(b, rows=score[:, None]) for b, score in zip(batches, scores)]
    per_target, _ = per_sample(scored, n=n, epochs=epochs)
    pairs = [(b.positions[b.positions >= 0], b.rows[b.positions >= 0, 0]) for b in scored]
    return per_target[:, 0], pairs


def larger_norm_class_of_aux(batches: list[GradientBatch], view: AdversaryView, *, epochs: EpochChoice) -> int:
    """The auxiliary class whose received gradients (reduced over epochs as the targets' are) have the
    larger mean log-norm; 1 (Li et al.) unless gradients of both classes were received."""
    if not batches:
        return 1
    norms = [dataclasses.replace(b, rows=b.rows.norm(dim=1, keepdim=True), positions=positions_in(b.ids, view.aux_ids))
             for b in batches]
    norm, received = per_sample(norms, n=view.aux_ids.numel(), epochs=epochs)
    log_norm = norm[received, 0].clamp_min(torch.finfo(norm.dtype).tiny).log()
    y = view.aux_y[received.to(view.aux_y.device)].to(log_norm.device)
    if not (bool((y == 0).any()) and bool((y == 1).any())):
        return 1
    return int(log_norm[y == 1].mean() >= log_norm[y == 0].mean())


class NormScoring(GradientAttack):
    """Li et al.'s norm attack: the received gradient's norm scores the positive class."""

    anchor = "Li et al. 2022 (ICLR), norm scoring; SecretFlow norm_torch.py"

    Options = NormOptions
    binary_only = True
    needs_aux = False  # orients by aux gradients when it has some, else Li et al.'s class 1
    untunable = "a fixed rule on the gradients' norms: no hyperparameter for auxiliary labels to select"

    def infer(self, view: AdversaryView) -> dict[str, Inference]:
        batches = self.batches(view)
        larger = self.options.larger_norm_class
        if larger == "auto":
            larger = larger_norm_class_of_aux(batches, view, epochs=self.options.gradients_from)
        sign = 1.0 if larger == 1 else -1.0
        scores, pairs = scored_inference(
            batches, [sign * b.rows.norm(dim=1) for b in batches],
            n=view.target_ids["train"].numel(), epochs=self.options.gradients_from,
        )
        log_norm = (sign * scores).clamp_min(torch.finfo(scores.dtype).tiny).log()
        fit = kmeans(log_norm[:, None], k=2, generator=view.generator, n_init=3)
        large = (fit.labels == int(fit.centroids[:, 0].argmax())).long()
        predictions = large if larger == 1 else 1 - large
        return {"train": Inference(predictions=predictions, scores=scores, batch_scores=pairs)}


def aux_positive_rows(batches: list[GradientBatch], view: AdversaryView) -> dict[int, torch.Tensor]:
    """Batch index -> the received gradient of the first auxiliary positive in that batch (if any)."""
    positive = torch.zeros(view.aux_ids.numel() + 1, dtype=torch.bool, device=view.aux_y.device)
    positive[:-1] = view.aux_y == 1  # index -1 (not an aux id) stays False
    rows = {}
    for i, batch in enumerate(batches):
        hits = positive[positions_in(batch.ids, view.aux_ids).to(positive.device)].nonzero()
        if hits.numel():
            rows[i] = batch.rows[int(hits[0, 0])]
    return rows


class DirectionScoring(GradientAttack):
    """Li et al.'s direction attack: cosine with a known positive's gradient (same or nearest batch)."""

    anchor = "Li et al. 2022 (ICLR), direction scoring; SecretFlow direction_based_scoring_torch.py"

    Options = DirectionOptions
    binary_only = True
    needs_encoder = True
    untunable = "a fixed rule on the gradients' directions: no hyperparameter for auxiliary labels to select"

    def infer(self, view: AdversaryView) -> dict[str, Inference]:
        batches = self.batches(view)
        known = aux_positive_rows(batches, view)
        proxy = self._proxy_positive(view) if not known else None

        def reference(index: int, batch: GradientBatch) -> torch.Tensor:
            if known:
                return known[min(known, key=lambda j: abs(j - index))]
            rated = torch.where(batch.positions >= 0, proxy[batch.positions.clamp_min(0)], -torch.inf)
            return batch.rows[rated.argmax()]

        cosines = [F.cosine_similarity(b.rows, reference(i, b)[None], dim=1) for i, b in enumerate(batches)]
        scores, pairs = scored_inference(
            batches, cosines, n=view.target_ids["train"].numel(), epochs=self.options.gradients_from
        )
        return {"train": Inference(predictions=(scores > 0).long(), scores=scores, batch_scores=pairs)}

    def _proxy_positive(self, view: AdversaryView) -> torch.Tensor:
        """P(class 1) of each train target under the adversary's own aux-trained completion model."""
        return proxy_positive(view, view.targets["train"], epochs=self.options.proxy_epochs)
