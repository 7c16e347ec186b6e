"""Label inference by similarity (SecretFlow ``sfl/ml/nn/sl/attacks/sim_lia_torch.py``; "Similarity-based Label
Inference Attack against Training and Inference of Split Learning", IEEE TIFS 2024).

The adversary compares its targets with samples whose labels it knows, on unit-norm rows of either its own
embeddings (``data=embedding``: its bottom snapshot's outputs; no message needed, so it applies to methods that
send the adversary nothing, such as SS-VFL-I, one-shot VFL after its one gradient, or a FedHSSL encoder after
pretraining) or the gradients it received in finetuning (``data=gradient``, each sample's from the last epoch,
as SecretFlow records them):

- ``distance``: each target takes the label of its nearest known sample (cosine or euclidean);
- ``kmeans``: k-means with one known sample per class as initial centroid (SecretFlow: ``KMeans(init=...,
  n_init=1)``), clusters named one-to-one by the known samples' labels (Hungarian on their confusion matrix).

The known samples are the adversary's auxiliary labels: all of them by default (``known_per_class`` None; an
audit should use what the adversary holds), or ``known_per_class`` drawn per class (SecretFlow's benchmark: 1).
SecretFlow draws its known samples from the attacked samples' true labels; here they are only ever the
adversary's own auxiliary ones. With ``data=gradient`` those need received gradients of their own, so the
auxiliary samples must come from the labeled training samples (``partition.aux_source=labeled``).
"""

from __future__ import annotations

from typing import ClassVar, Literal

import torch
import torch.nn.functional as F
from pydantic import Field

from vflpriv.attacks.base import AdversaryView, Attack, Inference
from vflpriv.attacks.labels.gradient_clustering import name_clusters
from vflpriv.attacks.labels.gradients import per_sample, positions_in, received_gradients
from vflpriv.config.options import Options
from vflpriv.engine import FINETUNE, GRADIENT
from vflpriv.models.kmeans import kmeans_from
from vflpriv.models.training import apply_in_batches


class SimilarityOptions(Options):
    data: Literal["embedding", "gradient"] = Field(
        "embedding", description="the adversary's own embeddings (no message needed) or its received finetuning "
        "gradients (SecretFlow's benchmark default; needs partition.aux_source=labeled)")
    method: Literal["distance", "kmeans"] = Field("distance", description="nearest known sample, or k-means named by them")
    metric: Literal["cosine", "euclidean"] = Field("cosine", description="distance of the nearest-sample rule")
    known_per_class: int | None = Field(
        None, ge=1, description="known samples per class drawn from the auxiliary labels (a class holding fewer gives "
        "all it has; more than partition.aux / classes is refused); unset = all of them "
        "(SecretFlow's benchmark: 1)")
    read_only_with: ClassVar[dict[str, tuple[str, tuple]]] = {"metric": ("method", ("distance",))}


def nearest_known(rows: torch.Tensor, known: torch.Tensor, labels: torch.Tensor, *, metric: str) -> torch.Tensor:
    """The label of each row's nearest known row (rows unit-norm: cosine = largest dot product)."""
    return labels[closeness(rows, known, metric=metric).argmax(1)]


def closeness(rows: torch.Tensor, known: torch.Tensor, *, metric: str) -> torch.Tensor:
    """rows x known: cosine similarity (unit-norm rows), or minus the euclidean distance; larger is nearer."""
    return rows @ known.T if metric == "cosine" else -torch.cdist(rows, known)


def class_margin(rows: torch.Tensor, known: torch.Tensor, labels: torch.Tensor, *, metric: str) -> torch.Tensor:
    """How much nearer each row's nearest known row is than the nearest known row of any other class (its guess's
    confidence; 0 where only one class is known)."""
    near = closeness(rows, known, metric=metric)
    per_class = torch.stack([near[:, labels == c].max(1).values for c in labels.unique().tolist()], 1)
    if per_class.shape[1] < 2:
        return torch.zeros(rows.shape[0], dtype=near.dtype, device=near.device)
    top = per_class.topk(2, dim=1).values
    return top[:, 0] - top[:, 1]


def kmeans_named(rows: torch.Tensor, known: torch.Tensor, labels: torch.Tensor, *, classes: int,
                 generator: torch.Generator) -> torch.Tensor:
    """k-means from one known row per class, clusters named by the known rows' labels (one-to-one)."""
    present = labels.unique()
    starts = []
    for c in present.tolist():
        members = (labels == c).nonzero().flatten()
        pick = torch.randint(members.numel(), (1,), generator=generator, device=generator.device).item()
        starts.append(known[members[pick]])
    fit = kmeans_from(rows, torch.stack(starts))
    known_clusters = torch.cdist(known.double(), fit.centroids).argmin(1)
    votes = torch.zeros(len(starts), classes, dtype=torch.long, device=rows.device)
    votes.index_put_((known_clusters, labels), torch.ones_like(labels), accumulate=True)
    return name_clusters(votes)[fit.labels]


class SimilarityLabelInference(Attack):
    """Targets labelled by their similarity to the adversary's known samples."""

    Options = SimilarityOptions
    anchor = "SecretFlow sim_lia_torch.py (Similarity-based Label Inference Attack, IEEE TIFS 2024)"
    kind = "similarity"
    strongest_of_kind = True
    search_space = {"metric": ("cosine", "euclidean"), "method": ("distance", "kmeans"), "known_per_class": (None, 5)}

    def space(self) -> dict[str, tuple]:
        """Tunable on embeddings (it guesses any set of the adversary's rows); ``data=gradient`` guesses only the
        train targets whose gradients it received."""
        return dict(self.search_space) if self.options.data == "embedding" else {}

    def __init__(self, options: SimilarityOptions):
        super().__init__(options)
        self.needs_encoder = options.data == "embedding"

    def required_messages(self, phase: str) -> tuple[tuple[str, str], ...]:
        return ((GRADIENT, FINETUNE),) if self.options.data == "gradient" else ()

    def incompatible(self, run, *, num_classes: int) -> str:
        k = self.options.known_per_class
        if k is not None and k * num_classes > run.partition.aux:
            return (f"known_per_class={k} for {num_classes} classes needs {k * num_classes} auxiliary labels; the "
                    f"adversary holds partition.aux={run.partition.aux} (give at most {run.partition.aux // num_classes}"
                    ", or leave it unset for all of them)")
        if self.options.data == "gradient" and run.partition.aux_source != "labeled":
            return ("data=gradient names gradients by those of samples the adversary knows, and with "
                    "partition.aux_source=unlabeled it receives none; set partition.aux_source=labeled or data=embedding")
        if self.options.data == "gradient" and run.attack.phase != FINETUNE:
            return "data=gradient reads finetuning gradients; use attack.phase=finetune"
        return ""

    def infer(self, view: AdversaryView) -> dict[str, Inference]:
        if self.options.data == "gradient":
            rows, known, labels, covered = self._gradients(view)
            return {"train": Inference(predictions=self._label(rows, known, labels, view), covered=covered)}
        encode = lambda x: F.normalize(apply_in_batches(view.encoder, x).flatten(1).double(), dim=1)  # noqa: E731
        known, labels = self._known(encode(view.aux_x), view.aux_y, view)
        out = {}
        for name, x in view.targets.items():
            rows = encode(x)
            margin = (class_margin(rows, known, labels, metric=self.options.metric).float()
                      if self.options.method == "distance" else None)
            out[name] = Inference(predictions=self._label(rows, known, labels, view), confidence=margin)
        return out

    def _label(self, rows, known, labels, view: AdversaryView) -> torch.Tensor:
        if self.options.method == "kmeans":
            return kmeans_named(rows, known, labels, classes=view.num_classes, generator=view.generator)
        return nearest_known(rows, known, labels, metric=self.options.metric)

    def _known(self, rows: torch.Tensor, labels: torch.Tensor, view: AdversaryView) -> tuple[torch.Tensor, torch.Tensor]:
        """The known samples: every auxiliary one, or ``known_per_class`` of each class drawn from them."""
        k = self.options.known_per_class
        if k is None:
            return rows, labels
        chosen = []
        for c in labels.unique().tolist():
            members = (labels == c).nonzero().flatten()
            order = torch.randperm(members.numel(), generator=view.generator, device=view.generator.device)
            chosen.append(members[order[:k].to(members.device)])
        picked = torch.cat(chosen)
        return rows[picked], labels[picked]

    def _gradients(self, view: AdversaryView):
        """Unit-norm last-epoch gradients of the train targets (rows), of the known auxiliary samples, their labels,
        and which targets received one."""
        batches = received_gradients(view, phase=FINETUNE, targets=view.target_ids["train"])
        rows, covered = per_sample(batches, n=view.target_ids["train"].numel(), epochs="last")
        aux = [b.__class__(b.epoch, b.rows, b.ids, positions_in(b.ids, view.aux_ids)) for b in batches]
        aux_rows, aux_received = per_sample(aux, n=view.aux_ids.numel(), epochs="last")
        if not bool(aux_received.any()):
            raise RuntimeError("no gradient of an auxiliary sample was received: nothing to compare with")
        known, labels = self._known(F.normalize(aux_rows[aux_received].double(), dim=1),
                                    view.aux_y[aux_received.to(view.aux_y.device)].to(aux_rows.device), view)
        return F.normalize(rows.double(), dim=1), known, labels, covered
