"""Marvell (Li et al. 2022, "Label Leakage and Protection in Two-party Split Learning", ICLR 2022;
REFERENCE.md §11): per-batch optimised, class-dependent Gaussian noise on the gradients of a binary task.

For one gradient message, the protecting (active) party models the gradients of each class in the
batch as isotropic Gaussians N(g1, v I) (positives) and N(g0, u I) (negatives): g1, g0 the class means,
v, u the average per-coordinate variances, p the fraction of positives, Delta = g1 - g0, g = ||Delta||^2.
It adds noise with covariance Sigma_1 (positives) or Sigma_0 (negatives), each of the form

    Sigma_k = lam1k * e e^T + lam2k * (I - e e^T),   e = Delta / ||Delta||,

chosen to minimise the symmetrised KL divergence between the two perturbed distributions (an upper
bound on any scoring attacker's detection power in the paper), subject to the power budget
p * tr(Sigma_1) + (1 - p) * tr(Sigma_0) <= P with P = s * g and s the strength (the reference code's
``init_scale``):

    KL_sym = 0.5 * [(d-1)(lam20+u)/(lam21+v) + (d-1)(lam21+v)/(lam20+u)
                    + (lam10+u+g)/(lam11+v) + (lam11+v+g)/(lam10+u)] - d.

Solve (:func:`solve_marvell`): the optimum puts perpendicular noise only on the class with the
smaller variance (lam21 = 0 if u <= v, else lam20 = 0). For a fixed perpendicular variance z, the two
parallel variances have the closed form (lam11+v)/(lam10+u) = sqrt((C + (1-p) g) / (C + p g)), C the
remaining budget plus (1-p)u + pv, clipped to the feasible range (the objective is convex in that
ratio); z itself is found by a bounded 1-D minimisation. A batch holding a single class reuses the
last two-class batch's solution (before any, it passes unchanged: there is no class contrast to hide).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from scipy.optimize import minimize_scalar

from vflpriv.common.errors import ConfigError
from vflpriv.defenses.base import Defense, StrengthAxis
from vflpriv.defenses.rows import as_rows
from vflpriv.engine.message import Message


@dataclass(frozen=True)
class MarvellNoise:
    """Noise variances along e (lam1k) and across it (lam2k) for negatives (k = 0) and positives (k = 1)."""

    lam10: float
    lam20: float
    lam11: float
    lam21: float


def sym_kl(noise: MarvellNoise, *, u: float, v: float, d: int, g: float) -> float:
    """KL(P1~ || P0~) + KL(P0~ || P1~) of the perturbed isotropic class models (the objective above)."""
    a0, a1 = noise.lam10 + u, noise.lam11 + v
    b0, b1 = noise.lam20 + u, noise.lam21 + v
    if min(a0, a1) <= 0:
        return math.inf
    if b0 == b1:  # identical across e (point masses included): no divergence there
        perp = 2.0 * (d - 1)
    elif min(b0, b1) <= 0:
        return math.inf
    else:
        perp = (d - 1) * (b0 / b1 + b1 / b0)
    return 0.5 * (perp + (a0 + g) / a1 + (a1 + g) / a0) - d


def _parallel(*, budget: float, lo0: float, lo1: float, u: float, v: float, g: float, p: float) -> tuple[float, float]:
    """Best (lam10, lam11) with (1-p) lam10 + p lam11 = budget, lam10 >= lo0, lam11 >= lo1 (closed form)."""
    c = budget + (1 - p) * u + p * v
    ratio = math.sqrt((c + (1 - p) * g) / (c + p * g))
    # a = lam10 + u falls and b = lam11 + v = ratio * a rises with the ratio: clip it to the feasible interval.
    r_hi = c / (p * (lo0 + u)) - (1 - p) / p if lo0 + u > 0 else math.inf
    r_lo = (lo1 + v) * (1 - p) / (c - p * (lo1 + v)) if c > p * (lo1 + v) else math.inf
    r = min(max(ratio, r_lo), r_hi)
    a = c / ((1 - p) + p * r)
    lam10 = max(a - u, lo0)
    return lam10, max((budget - (1 - p) * lam10) / p, lo1)


def solve_marvell(*, u: float, v: float, d: int, g: float, p: float, power: float) -> MarvellNoise:
    """Minimise ``sym_kl`` under p tr(Sigma_1) + (1-p) tr(Sigma_0) = power (see the module docstring)."""
    if u == 0.0 and v == 0.0:  # point masses: only the direction e carries information
        lam10, lam11 = _parallel(budget=power, lo0=0.0, lo1=0.0, u=u, v=v, g=g, p=p)
        return MarvellNoise(lam10, 0.0, lam11, 0.0)
    neg_perp = u <= v  # perpendicular noise goes to the class with the smaller spread

    def build(z: float) -> MarvellNoise:
        if neg_perp:
            lam10, lam11 = _parallel(budget=power - (1 - p) * (d - 1) * z, lo0=z, lo1=0.0, u=u, v=v, g=g, p=p)
            return MarvellNoise(lam10, z, lam11, 0.0)
        lam10, lam11 = _parallel(budget=power - p * (d - 1) * z, lo0=0.0, lo1=z, u=u, v=v, g=g, p=p)
        return MarvellNoise(lam10, 0.0, lam11, z)

    z_max = power / (((1 - p) if neg_perp else p) * d)
    objective = lambda z: sym_kl(build(z), u=u, v=v, d=d, g=g)  # noqa: E731
    best = minimize_scalar(objective, bounds=(0.0, z_max), method="bounded", options={"xatol": 1e-12 + 1e-9 * z_max})
    z = min((0.0, z_max, float(best.x)), key=objective)
    return build(z)


class Marvell(Defense):
    """Li et al.'s Marvell on the gradients the active party sends; strength s sets the budget P = s ||g1 - g0||^2."""

    default_kinds = ("gradient",)
    supported_kinds = ("gradient",)
    axis = StrengthAxis(name="power", stronger="higher", identity=0.0)
    binary_only = True
    audit_strengths = {"finetune": (0.1, 1.0, 4.0)}  # Li et al. sweep s in 0.1..4
    reads_labels = True  # each gradient message's noise is solved from the batch's labels

    def bind(self, federation) -> None:
        """Keep the federation: the protecting active party reads its labels of each batch from it."""
        self.federation = federation
        self._last: tuple[torch.Tensor, MarvellNoise] | None = None

    def transform(self, tensor: torch.Tensor, message: Message) -> torch.Tensor:
        if message.sample_ids is None:
            raise ConfigError("marvell protects per-sample gradient messages; this one carries no sample ids")
        rows = as_rows(tensor)
        y = self.federation.active.labels[message.sample_ids].to(rows.device) == 1
        if 0 < int(y.sum()) < y.numel():
            self._last = self._solve(rows.double(), y)
        if self._last is None:
            return tensor
        direction, noise = self._last
        return (rows + self._noise(direction, noise, y).to(rows.dtype)).reshape(tensor.shape)

    def _solve(self, rows: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, MarvellNoise]:
        pos, neg = rows[y], rows[~y]
        delta = pos.mean(0) - neg.mean(0)
        g = float(delta.pow(2).sum())
        v = float(pos.var(0, unbiased=False).mean())
        u = float(neg.var(0, unbiased=False).mean())
        p = float(y.double().mean())
        noise = solve_marvell(u=u, v=v, d=rows.shape[1], g=g, p=p, power=self.strength * g)
        return delta / max(math.sqrt(g), 1e-30), noise

    def _noise(self, direction: torch.Tensor, noise: MarvellNoise, y: torch.Tensor) -> torch.Tensor:
        """xi sqrt(lam1k - lam2k) e + sqrt(lam2k) N(0, I) for each row, k its label."""
        n, d = y.numel(), direction.numel()
        lam_par = torch.where(y, noise.lam11, noise.lam10).double()
        lam_perp = torch.where(y, noise.lam21, noise.lam20).double()
        g = self.generator
        xi = torch.randn(n, generator=g, dtype=torch.float64, device=g.device).to(y.device)
        iso = torch.randn(n, d, generator=g, dtype=torch.float64, device=g.device).to(y.device)
        along = (lam_par - lam_perp).clamp_min(0).sqrt() * xi
        return along[:, None] * direction.to(y.device)[None] + lam_perp.sqrt()[:, None] * iso
