"""Label differential privacy by randomised response (REFERENCE.md §11; Warner 1965, Ghazi et al. 2021).

Each label the active party holds is kept with probability e^eps / (e^eps + C - 1) and otherwise
replaced by one of the other C - 1 classes uniformly (each with probability 1 / (e^eps + C - 1)),
which is eps-label-DP for C classes. The labels are randomised once, before training (see
:class:`vflpriv.defenses.base.LabelDefense`), and every epoch trains with the same noisy labels.

Strength axis: epsilon, where *lower* protects more; +inf is the identity and 0 makes the labels
uniformly random. A sweep therefore lists epsilons (e.g. ``--strengths 8,4,2,1``); the recorded
``strength`` is epsilon and ``strength_stronger`` is ``lower``, so tables and CAP know the direction.
"""

from __future__ import annotations

import math

import torch

from vflpriv.defenses.base import LabelDefense, StrengthAxis


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


class LabelDP(LabelDefense):
    """Randomised response with epsilon = strength on the labels the active party trains with."""

    axis = StrengthAxis(name="epsilon", stronger="lower", identity=math.inf, search=(0.05, 20.0))
    audit_strengths = {"finetune": (8.0, 2.0, 1.0)}

    def relabel(self, labels: torch.Tensor, *, num_classes: int) -> torch.Tensor:
        return randomised_response(labels, epsilon=self.strength, num_classes=num_classes, generator=self.generator)

    def privacy_spent(self) -> float | None:
        """epsilon: randomised response is epsilon-label-DP for the labels, and every message of the training is
        computed from the randomised labels (a post-processing), so the whole transcript is too."""
        return None if self.is_identity else float(self.strength)
