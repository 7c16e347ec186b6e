"""Label differential privacy by randomised response (REFERENCE.md §11; Warner 1965, Ghazi et al. 2021).

Each label the active party holds is kept with probability e^eps / (e^eps + C - 1) and otherwise
replaced by one of the other C - 1 classes uniformly (each with probability 1 / (e^eps + C - 1)),
which is eps-label-DP for C classes. The labels are randomised once, before training (see
:class:`vflpriv.defenses.base.LabelDefense`), and every epoch trains with the same noisy labels.

``prior: two-stage`` is Ghazi et al.'s RR-with-prior in two stages (LP-2ST, NeurIPS 2021, Alg. 2-3): a random half
of the labels gets plain randomised response; a classifier the active party trains on its own features and those
noisy labels gives every sample of the other half a prior p over the classes, and that half gets RRWithPrior: with
Y_k the k classes of largest prior and k* maximising e^eps / (e^eps + k - 1) * p(Y_k), a label in Y_k* is kept with
probability e^eps / (e^eps + k* - 1) and replaced by another class of Y_k* otherwise, and a label outside Y_k* is
replaced by a uniform class of Y_k*. Each label passes one eps-DP mechanism, and the prior depends on the other half's
noisy labels only (a post-processing), so the whole is eps-label-DP; a good prior keeps more labels right at the same
eps (with a uniform prior k* = C: plain randomised response).

Strength axis: epsilon, where *lower* protects more; +inf is the identity and 0 makes the labels
uniformly random. A sweep therefore lists epsilons (e.g. ``--strengths 8,4,2,1``); the recorded
``strength`` is epsilon and ``strength_stronger`` is ``lower``, so tables and CAP know the direction.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

import torch
from pydantic import Field
from torch import nn

from vflpriv.config.options import Options
from vflpriv.defenses.base import LabelDefense, StrengthAxis
from vflpriv.models.encoders import build_encoder, init_parameters
from vflpriv.models.training import apply_in_batches, fit_classifier

if TYPE_CHECKING:
    from vflpriv.engine.party import Federation


class LabelDPOptions(Options):
    prior: Literal["uniform", "two-stage"] = Field(
        "uniform", description="uniform: plain randomised response; two-stage: RR-with-prior (Ghazi et al. 2021's "
        "LP-2ST), the prior from a classifier on the active party's features and the first half's noisy labels")
    prior_epochs: int = Field(5, ge=1, description="two-stage: epochs of the first-stage classifier (few keep its prior "
                              "calibrated: splitnn on digits, eps 4, 3 seeds: 5 epochs 0.904 test accuracy, 100 epochs 0.880, "
                              "plain randomised response 0.880)")


def keep_probability(*, epsilon: float, num_classes: int) -> float:
    """P(label unchanged) = e^eps / (e^eps + C - 1), computed stably for large eps."""
    if math.isinf(epsilon):
        return 1.0
    return 1.0 / (1.0 + (num_classes - 1) * math.exp(-epsilon))


def randomised_response(labels: torch.Tensor, *, epsilon: float, num_classes: int, generator: torch.Generator) -> torch.Tensor:
    """Keep each label w.p. keep_probability, else draw one of the other classes uniformly."""
    device = generator.device
    n = labels.numel()
    keep = torch.rand(n, generator=generator, device=device) < keep_probability(epsilon=epsilon, num_classes=num_classes)
    shift = torch.randint(1, num_classes, (n,), generator=generator, device=device)
    other = (labels.to(device) + shift) % num_classes
    return torch.where(keep, labels.to(device), other).to(labels.device)


def top_k_choice(prior: torch.Tensor, *, epsilon: float) -> torch.Tensor:
    """Per row of ``prior`` (n x C), k* = argmax_k e^eps / (e^eps + k - 1) * (sum of the k largest priors)."""
    ks = torch.arange(1, prior.shape[1] + 1, dtype=prior.dtype)
    keep = 1.0 / (1.0 + (ks - 1) * math.exp(-epsilon))
    mass = prior.sort(dim=1, descending=True).values.cumsum(1)
    return (mass * keep).argmax(1) + 1


def rr_with_prior(labels: torch.Tensor, prior: torch.Tensor, *, epsilon: float,
                  generator: torch.Generator) -> torch.Tensor:
    """RRWithPrior (Ghazi et al. 2021, Alg. 2): randomised response within each row's k* most likely classes."""
    n, classes = prior.shape
    k = top_k_choice(prior, epsilon=epsilon)
    order = prior.argsort(dim=1, descending=True, stable=True)
    rank = torch.empty_like(order)
    rank.scatter_(1, order, torch.arange(classes).expand(n, classes))
    inside = rank.gather(1, labels[:, None]).squeeze(1) < k
    keep = 1.0 / (1.0 + (k - 1).to(prior.dtype) * math.exp(-epsilon))
    u = torch.rand(n, generator=generator, device=generator.device)
    draw = torch.rand(n, generator=generator, device=generator.device)
    uniform = order.gather(1, (draw * k).long().clamp(max=classes - 1)[:, None]).squeeze(1)  # any of Y_k
    others = (draw * (k - 1).clamp(min=1)).long()  # one of the k - 1 others, in rank order past the label
    label_rank = rank.gather(1, labels[:, None]).squeeze(1)
    other = order.gather(1, (others + (others >= label_rank).long()).clamp(max=classes - 1)[:, None]).squeeze(1)
    return torch.where(inside, torch.where(u < keep, labels, other), uniform)


class LabelDP(LabelDefense):
    """Randomised response with epsilon = strength on the labels the active party trains with (optionally with a
    prior: RR-with-prior in two stages)."""

    Options = LabelDPOptions
    axis = StrengthAxis(name="epsilon", stronger="lower", identity=math.inf, search=(0.05, 20.0))
    #: 8 is above what the audit's canaries can test (about 4.5 for 75 ten-class canaries); 4 is below it.
    audit_strengths = {"finetune": (4.0, 2.0, 1.0)}
    anchor = "Warner 1965 (randomised response); Ghazi et al. 2021 (RR-with-prior, LP-2ST; google-research/label-dp)"

    def relabel(self, labels: torch.Tensor, *, num_classes: int) -> torch.Tensor:
        return randomised_response(labels, epsilon=self.strength, num_classes=num_classes, generator=self.generator)

    def bind(self, federation: Federation) -> None:
        if self.is_identity or self.options.prior == "uniform":
            super().bind(federation)
            return
        self._two_stage(federation)

    def _two_stage(self, federation: Federation) -> None:
        """LP-2ST: plain randomised response on a random half, RR-with-prior on the other with the prior of a
        classifier trained on the active party's features of the first half and their noisy labels (Adam lr 1e-3,
        weight decay 1e-5, batch 64: vflpriv's classifier recipe). Each label is used once, by one stage."""
        active, c = federation.active, federation.num_classes
        ids = (active.labels >= 0).nonzero().flatten()
        order = ids[torch.randperm(ids.numel(), generator=self.generator, device=self.generator.device).to(ids.device)]
        first, second = order[: ids.numel() // 2], order[ids.numel() // 2:]
        labels = active.labels.clone()
        labels[first] = self.relabel(active.labels[first], num_classes=c)
        encoder = build_encoder(active.spec, federation.model, generator=self.generator)
        model = nn.Sequential(encoder, init_parameters(nn.Linear(encoder.out_dim, c), generator=self.generator))
        model = model.to(federation.device)
        fit_classifier(model, active.x_train[first], labels[first], epochs=self.options.prior_epochs, lr=1e-3,
                       weight_decay=1e-5, batch_size=64, generator=self.generator, what="RR-with-prior's first stage")
        prior = apply_in_batches(model, active.x_train[second]).softmax(1).cpu()
        labels[second] = rr_with_prior(active.labels[second].cpu(), prior, epsilon=self.strength,
                                       generator=self.generator).to(labels.device)
        self.replace_labels(federation, labels)

    @classmethod
    def claimed_epsilon(cls, strength: float, *, finetune, options: dict) -> tuple[float, float] | None:
        return None if math.isinf(strength) else (float(strength), 0.0)

    def privacy_spent(self) -> float | None:
        """epsilon: randomised response (with or without a prior) is epsilon-label-DP for each label, and every
        message of the training is computed from the randomised labels (a post-processing), so the whole transcript
        is too."""
        return None if self.is_identity else float(self.strength)
