"""FixMatch (Sohn et al. 2020) and FixMatch-tab (paper 002 §4.1, Eq. 4-6): semi-supervised local training.

One step on a labeled batch (x, y) and an unlabeled batch u (paper 002 Eq. 4, FixMatch Eq. 2-4):

    l_s = CE(model(weak(x)), y)
    q   = softmax(model(weak(u)))            (no gradient)
    l_u = mean_i 1(max q_i >= tau) CE(model(strong(u_i)), argmax q_i)
    loss = l_s + lambda_u l_u

Views: FixMatch-tab for tabular parties (Eq. 5-6): one mask per sample serves both views, each entry
masked with probability r_m (0.2) and filled with the party's local feature mean (the text: "r_m is the
expected ratio of elements that are masked"; Eq. 6 as printed swaps m and 1 - m); the strong view adds
N(0, sigma^2) noise (sigma 0.1) to the weak one. Categorical leading columns (embedding indices) are
masked to the reserved "unknown" index 0 and get no noise (a noisy index is no category). Images: weak =
a mild random resized crop, strong = a wider crop and Cutout (FixMatch's strong augmentation ends with
Cutout; RandAugment's photometric operations have no meaning on these small grey halves). No flip: a
flipped half image is another shape.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from vflpriv.data.base import PartySpec
from vflpriv.models.ssl.augment import augment_image

Views = Callable[[Tensor, torch.Generator], tuple[Tensor, Tensor]]
"""``views(x, generator) -> (weak(x), strong(x))``."""

Term = Callable[[Tensor, Tensor], "Tensor | None"]
"""``term(inputs, h) -> a term added to the loss, or None``: from a step's inputs (every view of the batch) and the
model's extractor's outputs on them (a passive party's feature defenses, ``passive_loss``)."""


@dataclass(frozen=True)
class TabularViews:
    """FixMatch-tab's weak and strong views of one tabular party, fitted on its local samples (Eq. 5-6)."""

    mean: Tensor
    n_categorical: int
    mask_rate: float = 0.2
    sigma: float = 0.1

    def __call__(self, x: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        masked = torch.rand(x.shape, generator=generator, device=generator.device).to(x.device) < self.mask_rate
        fill = self.mean.expand_as(x).clone()
        fill[:, : self.n_categorical] = 0.0  # categorical: the "unknown" index
        weak = torch.where(masked, fill, x)
        noise = self.sigma * torch.randn(x.shape, generator=generator, device=generator.device).to(x.device)
        noise[:, : self.n_categorical] = 0.0
        return weak, weak + noise


def cutout(x: Tensor, *, fraction: float, generator: torch.Generator) -> Tensor:
    """Zero one random square per image, of side ``fraction`` of the shorter side (DeVries & Taylor 2017)."""
    n, _, h, w = x.shape
    side = max(1, round(fraction * min(h, w)))
    top = torch.randint(0, h - side + 1, (n,), generator=generator, device=generator.device).to(x.device)
    left = torch.randint(0, w - side + 1, (n,), generator=generator, device=generator.device).to(x.device)
    rows = torch.arange(h, device=x.device)[None, :, None]
    cols = torch.arange(w, device=x.device)[None, None, :]
    inside = ((rows >= top[:, None, None]) & (rows < top[:, None, None] + side)
              & (cols >= left[:, None, None]) & (cols < left[:, None, None] + side))
    return x.masked_fill(inside[:, None], 0.0)


def image_views(x: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    weak = augment_image(x, generator=generator, crop_scale=(0.8, 1.0), flip=False)
    strong = cutout(augment_image(x, generator=generator, crop_scale=(0.4, 1.0), flip=False), fraction=0.5,
                    generator=generator)
    return weak, strong


def party_views(spec: PartySpec, x_local: Tensor, *, mask_rate: float, sigma: float) -> Views:
    """The (weak, strong) view function of one party, fitted on its own local samples."""
    if spec.modality == "image":
        return image_views
    return TabularViews(x_local.mean(dim=0, keepdim=True), spec.n_categorical, mask_rate, sigma)


def fixmatch_loss(
    model: nn.Module, x: Tensor, y: Tensor, u: Tensor, views: Views, *, threshold: float, lambda_u: float,
    generator: torch.Generator, term: Term | None = None,
) -> Tensor:
    """l_s + lambda_u l_u on one labeled and one unlabeled batch, all views through the model at once; with ``term``,
    plus ``term(views, model.extractor(views))`` (the model then runs as its extractor and its head: the same
    operations)."""
    weak_x, _ = views(x, generator)
    weak_u, strong_u = views(u, generator) if u.shape[0] else (u, u)
    inputs = torch.cat([weak_x, weak_u, strong_u])
    extra = None
    if term is None:
        logits = model(inputs)
    else:
        h = model.extractor(inputs)
        logits, extra = model.head(h), term(inputs, h)
    n, m = x.shape[0], u.shape[0]
    loss = F.cross_entropy(logits[:n], y)
    if m:
        with torch.no_grad():
            confidence, pseudo = logits[n : n + m].softmax(1).max(1)
        kept = (confidence >= threshold).float()
        loss = loss + lambda_u * (F.cross_entropy(logits[n + m :], pseudo, reduction="none") * kept).mean()
    return loss if extra is None else loss + extra


def train_fixmatch(
    model: nn.Module, x: Tensor, y: Tensor, u: Tensor, views: Views, *, epochs: int, batch_size: int, lr: float,
    momentum: float, weight_decay: float, threshold: float, lambda_u: float, batches: torch.Generator,
    augment: torch.Generator, term: Term | None = None,
) -> nn.Module:
    """Local SSL of paper 002 (Alg. 1 lines 29-34): each epoch passes over the unlabeled samples ``u`` in
    batches, each paired with a labeled batch of the same size drawn in turn from (x, y) (reshuffled when
    used up); SGD with momentum (FixMatch's optimiser). With no unlabeled sample, an epoch passes over (x, y).
    ``term`` is added to each step's loss (:func:`fixmatch_loss`)."""
    from vflpriv.models.training import index_batches, make_optimizer, require_finite

    opt = make_optimizer(model.parameters(), name="sgd", lr=lr, weight_decay=weight_decay, momentum=momentum)
    labeled = torch.arange(x.shape[0], device=x.device)
    unlabeled = torch.arange(u.shape[0], device=u.device)
    queue: list[Tensor] = []
    finite = torch.ones((), dtype=torch.bool, device=x.device)
    model.train()
    for _ in range(epochs):
        steps = index_batches(unlabeled, batch_size=batch_size, generator=batches) if u.shape[0] else \
            index_batches(labeled, batch_size=batch_size, generator=batches)
        for step in steps:
            if not queue:
                queue = list(index_batches(labeled, batch_size=batch_size, generator=batches))
            lab = queue.pop(0)
            unl = step if u.shape[0] else unlabeled[:0]
            loss = fixmatch_loss(model, x[lab], y[lab], u[unl], views, threshold=threshold, lambda_u=lambda_u,
                                 generator=augment, term=term)
            finite &= torch.isfinite(loss)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    require_finite(finite, "the local semi-supervised loss")
    return model.eval()
