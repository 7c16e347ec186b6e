"""GradPerturb (Yang et al. 2022, "Differentially Private Label Protection in Split Learning"): the gradient the
active party sends is mixed with per-class gradients under Laplace weights (VFLAIR ``perturb`` in
``src/evaluates/defenses/defense_functions.py``; ``calculate_gradient_each_class`` in ``src/party/active_party.py``).

For each class c the active party computes G^(c) = d CE(pred, c) / dz_p, the gradient had every label of the batch
been c, draws u ~ Laplace(0, 2 / epsilon) of shape B x C, and sends G + sum_c u[:, c] G^(c). Its own update uses the
true gradient (only what it sends changes). Strength: ``laplace_eps``, the paper's epsilon as the Laplace weights'
parameter, lower is stronger; +inf is the identity. VFLAIR's configs use 0.01 (one 0.3). Cost: C extra backward
passes through the top per batch.

It claims no epsilon (no ``privacy_spent``): the active party trains on the clean labels, so the per-class gradients
it mixes carry them through its model, and nothing composes the exchanges; ``laplace_eps`` is a noise parameter, not
a privacy budget vflpriv claims (review eps F6).
"""

from __future__ import annotations

import math

import torch

from vflpriv.common.errors import ConfigError
from vflpriv.defenses.base import GRADIENT_COMPUTATION, StrengthAxis, TrainingDefense
from vflpriv.engine.hooks import PerClass


def laplace(shape: tuple[int, ...], *, scale: float, generator: torch.Generator) -> torch.Tensor:
    """Laplace(0, scale) draws by the inverse CDF of uniforms from ``generator``."""
    u = torch.rand(shape, generator=generator, device=generator.device) - 0.5
    return -scale * u.sign() * torch.log1p(-2.0 * u.abs())


class GradPerturb(TrainingDefense):
    """The sent gradient plus Laplace(2/laplace_eps)-weighted per-class gradients; laplace_eps is Yang et al.'s noise
    parameter, not an epsilon vflpriv claims (it claims none)."""

    hook_points = frozenset({GRADIENT_COMPUTATION})
    axis = StrengthAxis(name="laplace_eps", stronger="lower", identity=math.inf, low=0.0, high=math.inf,
                        search=(0.01, 10.0), log=True)
    audit_strengths = {"finetune": (10.0, 1.0, 0.1)}
    anchor = "Yang et al. 2022; VFLAIR defense_functions.py perturb, active_party.py calculate_gradient_each_class"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        if self.strength <= 0:
            raise ConfigError("grad-perturb strength (laplace_eps, the Laplace weights' parameter) must be above 0")

    def needs_per_class(self) -> bool:
        return not self.is_identity

    def sent_gradient(self, party: int, gradient: torch.Tensor, per_class: PerClass) -> torch.Tensor:
        if self.is_identity:
            return gradient
        weights = laplace((gradient.shape[0], self.num_classes), scale=2.0 / self.strength,
                          generator=self.generator).to(gradient.device, gradient.dtype)
        sent = gradient.clone()
        for c in range(self.num_classes):
            sent += weights[:, c:c + 1] * per_class(c)
        return sent
