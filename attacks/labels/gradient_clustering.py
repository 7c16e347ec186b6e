"""Gradient clustering (one-shot VFL step 3, Sun et al., REFERENCE.md §7 and §12; ``method=spectral``: SecretFlow's
grad_lia, spectral clustering on the gradients' cosine similarities).

The adversary runs k-means (k = number of classes) on the per-sample gradients dL/dh_i it received
in the attacked phase (the first epoch, the default; the last; or each sample's mean over epochs; the
single gradient message of one-shot VFL is epoch 0). By default the gradients are scaled to unit
norm first: one-shot VFL's rationale is that gradients of one class share a *direction*, and once
the model trains their norms spread over orders of magnitude and raw k-means splits by norm instead
(``normalize=false`` clusters raw gradients, as the one-shot algorithm does with an untrained head).
Its targets are the ``train`` targets (the labeled aligned samples whose gradients it received);
test samples produce no gradient and are not guessed.

Naming the clusters needs labels, and the adversary's auxiliary samples are outside the labeled set,
so in split learning it never receives their gradients. What it can do, and what this attack does:

- an auxiliary sample whose own gradient *was* received (a method that sends gradients for more
  than the labeled samples) joins the cluster of the nearest centroid of that gradient;
- every other auxiliary sample is placed by its k nearest targets (cosine in the feature space of
  the adversary's own bottom model, raw features without one): a majority vote of their clusters.

Each cluster is then named by the majority of its auxiliary labels, made one-to-one (clusters and
classes are both k): ``linear_sum_assignment`` on the cluster x aux-label vote counts, i.e. the
naming that agrees with the most auxiliary labels. That is the reported accuracy (the default for
CAP). The runner also scores the clusters under the Hungarian matching on the *targets'* labels
(``attack_accuracy_hungarian``, an upper bound no one-to-one naming without those labels can pass).
For binary tasks the score of class 1 is d(centroid named 0) - d(centroid named 1).
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from scipy.optimize import linear_sum_assignment

from vflpriv.attacks.base import AdversaryView, Inference, labeled_targets
from vflpriv.attacks.labels.gradients import EpochChoice, GradientAttack, per_sample, positions_in
from vflpriv.config.options import Options
from vflpriv.engine.adversary import HOLDOUT
from vflpriv.models.kmeans import Clustering, kmeans
from vflpriv.models.training import apply_in_batches


class GradientClusteringOptions(Options):
    method: Literal["kmeans", "spectral"] = Field(
        "kmeans", description="k-means (one-shot VFL), or spectral clustering on 1 + the gradients' cosine "
        "similarities (SecretFlow grad_lia)")
    gradients_from: EpochChoice = Field("first", description="each sample's gradient from its first or last epoch, or the mean")
    normalize: bool = Field(True, description="cluster unit-norm gradients (directions) instead of raw ones")
    n_init: int = Field(10, ge=1, description="k-means++ restarts; the lowest inertia wins")
    neighbours: int = Field(5, ge=1, description="targets voting for an auxiliary sample's cluster")
    read_only_with: ClassVar[dict[str, tuple[str, tuple]]] = {"n_init": ("method", ("kmeans",))}

#: SecretFlow's grad_lia clusters at most this many rows at once (a dense similarity matrix of them).
SPECTRAL_CHUNK = 30000


def spectral(rows: torch.Tensor, *, k: int, generator: torch.Generator) -> Clustering:
    """Spectral clustering of the rows on the affinity 1 + cosine similarity (SecretFlow
    ``grad_lia_attack_torch.py``: ``SpectralClustering(affinity="precomputed")``), in chunks of at most
    :data:`SPECTRAL_CHUNK` rows whose clusters are matched to the first chunk's by their centroids (Hungarian on
    cosine similarity: label-free, where SecretFlow names each chunk's clusters by the true labels). Centroids
    are the clusters' mean rows (as given), for placing auxiliary gradients and binary scores as k-means' are."""
    from sklearn.cluster import SpectralClustering  # scikit-learn: only when this variant runs

    unit = F.normalize(rows.double(), dim=1)
    labels = torch.empty(unit.shape[0], dtype=torch.long, device=unit.device)
    reference = None
    for chunk in torch.arange(unit.shape[0], device=unit.device).split(SPECTRAL_CHUNK):
        part = unit[chunk]
        seed = int(torch.randint(2**31 - 1, (1,), generator=generator, device=generator.device))
        found = torch.as_tensor(SpectralClustering(n_clusters=k, affinity="precomputed", random_state=seed).fit_predict(
            (1.0 + part @ part.T).cpu().numpy()), device=unit.device).long()
        centroids = torch.stack([part[found == c].mean(0) if bool((found == c).any()) else torch.zeros_like(part[0])
                                 for c in range(k)])
        if reference is None:
            reference = centroids
        else:
            rows_, cols = linear_sum_assignment((F.normalize(centroids, dim=1) @ F.normalize(reference, dim=1).T)
                                                .cpu().numpy(), maximize=True)
            found = torch.as_tensor(cols, device=unit.device)[torch.argsort(torch.as_tensor(rows_, device=unit.device))][found]
        labels[chunk] = found
    rows = rows.double()
    centroids = torch.stack([rows[labels == c].mean(0) if bool((labels == c).any()) else rows.mean(0) for c in range(k)])
    return Clustering(labels, centroids, 0.0)


def feature_space(view: AdversaryView, x: torch.Tensor) -> torch.Tensor:
    """Unit-norm features of the adversary's own bottom model (raw features without one)."""
    feats = apply_in_batches(view.encoder, x) if view.encoder is not None else x
    return F.normalize(feats.flatten(1).double(), dim=1)


def knn_vote(query: torch.Tensor, reference: torch.Tensor, labels: torch.Tensor, *, k: int, classes: int) -> torch.Tensor:
    """Majority cluster among the k most cosine-similar reference rows (rows already unit-norm)."""
    k = min(k, reference.shape[0])
    nearest = (query @ reference.T).topk(k, dim=1).indices
    votes = F.one_hot(labels[nearest], classes).sum(1)
    return votes.argmax(1)


def name_clusters(votes: torch.Tensor) -> torch.Tensor:
    """One-to-one cluster -> label map agreeing with the most votes (votes[c, y] = aux of label y in c)."""
    rows, cols = linear_sum_assignment(votes.cpu().numpy(), maximize=True)
    naming = torch.empty(votes.shape[0], dtype=torch.long)
    naming[torch.as_tensor(rows)] = torch.as_tensor(cols)
    return naming.to(votes.device)


class GradientClustering(GradientAttack):
    """k-means on received gradients; clusters named by the adversary's auxiliary labels."""

    anchor = "one-shot VFL step 3 (Sun et al.); SecretFlow grad_lia_attack_torch.py (method=spectral)"
    #: 1.000 on its targets with no defense, binary or not (benchmarks/results/anchor_attacks): the worst case.
    strongest_of_kind = True

    Options = GradientClusteringOptions
    search_space = {"method": ("kmeans", "spectral"), "neighbours": (5, 15), "gradients_from": ("first", "mean")}

    def incompatible(self, run, *, num_classes: int) -> str:
        targets = labeled_targets(run)
        if targets is not None and self.options.neighbours > targets:
            return (f"neighbours={self.options.neighbours} exceeds the {targets} training targets whose gradients "
                    f"vote (partition.labeled); give at most {targets}")
        return super().incompatible(run, num_classes=num_classes)

    def infer(self, view: AdversaryView) -> dict[str, Inference]:
        o, c = self.options, view.num_classes
        batches = self.batches(view)
        targets = view.target_ids["train"]
        grads, received = per_sample(batches, n=targets.numel(), epochs=o.gradients_from)
        if o.normalize:
            grads = F.normalize(grads, dim=1)
        fit = (spectral(grads[received], k=c, generator=view.generator) if o.method == "spectral" else
               kmeans(grads[received], k=c, generator=view.generator, n_init=o.n_init))
        space = feature_space(view, view.targets["train"])
        clusters = torch.empty(targets.numel(), dtype=torch.long, device=grads.device)
        clusters[received] = fit.labels
        if not bool(received.all()):
            clusters[~received] = knn_vote(space[~received], space[received], fit.labels, k=o.neighbours, classes=c)
        place = lambda x, ids: self._place(view, batches, fit, space, clusters, x, ids)  # noqa: E731
        aux_clusters = place(view.aux_x, view.aux_ids)
        votes = torch.zeros(c, c, dtype=torch.long, device=clusters.device)
        votes.index_put_((aux_clusters, view.aux_y.to(clusters.device)), torch.ones_like(aux_clusters), accumulate=True)
        naming = name_clusters(votes)
        d = torch.cdist(grads.double(), fit.centroids)
        nearest = d.topk(2, dim=1, largest=False).values
        confidence = torch.where(received, nearest[:, 1] - nearest[:, 0], torch.zeros_like(nearest[:, 0]))
        inference = Inference(predictions=naming[clusters], clusters=clusters, confidence=confidence.float())
        if c == 2:
            order = torch.argsort(naming)  # order[y] = the cluster named y
            inference.scores = (d[:, order[0]] - d[:, order[1]]).float()
        out = {"train": inference}
        if HOLDOUT in view.targets:  # a tuned search's hidden auxiliary samples: placed like the auxiliary ones
            out[HOLDOUT] = Inference(predictions=naming[place(view.targets[HOLDOUT], view.target_ids[HOLDOUT])])
        return out

    def _place(self, view: AdversaryView, batches, fit: Clustering, space: torch.Tensor, clusters: torch.Tensor,
               x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """Clusters of non-target rows: the nearest centroid of their own received gradient, else the vote of
        their k nearest targets in the adversary's feature space."""
        o = self.options
        placed = knn_vote(feature_space(view, x), space, clusters, k=o.neighbours, classes=view.num_classes)
        own_batches = [dataclasses.replace(b, positions=positions_in(b.ids, ids)) for b in batches]
        own_grads, received = per_sample(own_batches, n=ids.numel(), epochs=o.gradients_from)
        if bool(received.any()):
            own = F.normalize(own_grads, dim=1) if o.normalize else own_grads
            placed[received] = torch.cdist(own[received].double(), fit.centroids).argmin(1)
        return placed
