"""The feature prior: what a feature adversary infers about its victim's features without the federation, from its
known samples (the victim features of ``partition.aux_features``) and its own features only (DESIGN.md, two secrets).

- ``mean``: each victim feature's mean over the known samples, guessed for every target (the strongest trivial
  guesser, which no anchor reports: ANCHORS-FEATURES.md §1.2);
- ``regressor``: ridge regression from the adversary's own features (standardised on the known samples) to the
  victim's, fitted on the known pairs: in VFL the parties' features are correlated (two halves of one image, columns
  of one customer), so this is what the adversary's own data tell it. The server holds no features: its prior is the
  mean. Ridge rather than a network: with the few known samples of the default (29 on digits) a linear map is what
  they support, its leave-one-out error is exact in closed form (no training, no random stream: the audit's cost stays
  the attack's), and the mean is its limit at infinite penalty, so one criterion chooses between them;
- ``random``: U(0, 1) guesses, the anchors' baseline (Luo et al., SecretFlow), reported for parity only.

Leakage is measured against the prior as the adversary would choose it, on its own known samples, never on a
target: the ridge penalty (the mean included, as the infinite penalty; ties go to it) with the lowest exact
leave-one-out squared error (Allen 1974's PRESS, with the unpenalised intercept in the hat matrix). Guesses are
clipped to [0, 1], the range of the scaled features, which the adversary knows. Computed once per (training,
adversary, victim, phase, targets) in a process and shared by every feature attack on them.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import torch

from vflpriv.common.seeding import generator
from vflpriv.data.load import data_of
from vflpriv.engine.adversary import FeatureView
from vflpriv.runner.handed import tensors_digest

#: Ridge penalties tried, as multiples of the mean squared singular value of the standardised known features.
PENALTIES = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)


@dataclass(frozen=True)
class FeaturePriorPlan:
    """A feature attack's prior, resolved while planning (the seed of its U(0, 1) draws, the training it is shared
    across and its data: ``data_of``)."""

    seed: int
    training: str


def plan_feature_prior(run, attack) -> FeaturePriorPlan:
    """Keyed by the training, its data and ``partition.aux_features`` (the known samples it fits on; the training key
    leaves them out)."""
    return FeaturePriorPlan(run.seed, f"{run.training_key()}:{data_of(run)}:{run.partition.aux_features}")


@dataclass
class FeaturePrior:
    """The prior's guesses of every target set: ``chosen`` (``mean`` or ``regressor``, picked on the known samples),
    each candidate's, the U(0, 1) guesses, and the ridge penalty chosen (inf: the mean)."""

    chosen: str
    guesses: dict[str, dict[str, torch.Tensor]]
    penalty: float = math.inf

    def of(self, kind: str) -> dict[str, torch.Tensor]:
        return self.guesses[kind]


def _standardised(x: torch.Tensor, fit: torch.Tensor) -> torch.Tensor:
    """``x`` flattened, centred and scaled by the columns of ``fit`` (constant columns left unscaled)."""
    f = fit.flatten(1).double()
    std = f.std(0, unbiased=False)
    return (x.flatten(1).double() - f.mean(0)) / torch.where(std > 0, std, torch.ones_like(std))


def ridge_loo(x: torch.Tensor, y: torch.Tensor, penalty: float,
              svd: tuple[torch.Tensor, torch.Tensor] | None = None) -> float:
    """Exact leave-one-out squared error (summed over samples and outputs) of ridge regression of ``y`` on the
    centred ``x`` with an unpenalised intercept: residual_i / (1 - H_ii), H = J/n + X (X'X + a I)^-1 X'. ``svd``:
    ``x``'s left singular vectors and values, when already computed (one decomposition serves every penalty)."""
    n = x.shape[0]
    yc = y.flatten(1).double() - y.flatten(1).double().mean(0)
    hat = torch.full((n, n), 1.0 / n, dtype=torch.float64)
    if math.isfinite(penalty):
        u, s = svd if svd is not None else torch.linalg.svd(x, full_matrices=False)[:2]
        hat = hat + (u * (s**2 / (s**2 + penalty))) @ u.T
    residual = yc - (hat - torch.full_like(hat, 1.0 / n)) @ yc
    return float((residual / (1 - hat.diagonal())[:, None]).pow(2).sum())


def ridge_fit(x: torch.Tensor, y: torch.Tensor, penalty: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(weights, intercept) of ridge regression of ``y`` (flattened) on the centred ``x``."""
    yf = y.flatten(1).double()
    mean = yf.mean(0)
    gram = x.T @ x + penalty * torch.eye(x.shape[1], dtype=torch.float64)
    return torch.linalg.solve(gram, x.T @ (yf - mean)), mean


def compute(view: FeatureView, seed: int) -> FeaturePrior:
    """Every candidate's guesses of every target set of ``view``, and the chosen one."""
    y = view.aux_victim.cpu()
    shape, names = y.shape[1:], view.targets
    count = {name: view.received[name].shape[0] for name in names}
    guesses = {"mean": {name: y.mean(0, keepdim=True).expand(count[name], *shape).clone() for name in names}}
    rand = generator(seed, "prior:features:random")
    guesses["random"] = {name: torch.rand(count[name], *shape, generator=rand, device=rand.device) for name in names}
    if not view.own or y.shape[0] < 3:
        return FeaturePrior("mean", guesses)
    aux = view.own["aux"].cpu()
    x = _standardised(aux, aux)
    u, sv, _ = torch.linalg.svd(x, full_matrices=False)
    scale = float((sv**2).mean()) or 1.0
    errors = {a * scale: ridge_loo(x, y, a * scale, svd=(u, sv)) for a in PENALTIES}
    best = min(errors, key=lambda a: (errors[a], a))
    weights, intercept = ridge_fit(x, y, best)
    guesses["regressor"] = {name: (_standardised(view.own[name].cpu(), aux) @ weights + intercept)
                            .clamp(0, 1).float().reshape(count[name], *shape) for name in names}
    mean_error = ridge_loo(x, y, math.inf)
    chosen = "regressor" if errors[best] < mean_error else "mean"
    return FeaturePrior(chosen, guesses, best if chosen == "regressor" else math.inf)


#: The priors computed in this process: key -> (the prior, the key it was computed under, its guesses' digest).
_PRIORS: dict[str, tuple[FeaturePrior, str, bytes]] = {}


def _digest(prior: FeaturePrior) -> bytes:
    """A digest of every guess's bytes (:func:`vflpriv.runner.handed.tensors_digest`), in a fixed order."""
    return tensors_digest([prior.guesses[k][n] for k in sorted(prior.guesses) for n in sorted(prior.guesses[k])])


def feature_prior(plan: FeaturePriorPlan, view: FeatureView) -> FeaturePrior:
    """The prior of ``view``'s adversary on its targets, once per process and key. The key holds what the prior is
    computed from (the known samples' victim features, the adversary's own features of every set, the ids and the
    received sets' sizes); a stored prior is reused only while it checks out, else computed again: it was computed
    under this key (not another key's moved here) and no guess was changed since (a digest of their bytes: any change,
    through ``.data`` or numpy too; about half of computing them at image scale, 0.19 against 0.40 CPU s for 369 MB of
    guesses, and nothing at digits' scale). The store is this process's own, never written to disk, and a prior is
    never handed to an attack (it is computed before the attack reads its view; the runner's scoring only reads it)."""
    digest = hashlib.sha256()
    for name in ("aux", *view.targets):
        digest.update(name.encode())
        ids = view.aux_ids if name == "aux" else view.target_ids.get(name, torch.empty(0))
        digest.update(ids.detach().cpu().long().numpy().tobytes())
        digest.update(str(tuple(view.received[name].shape)).encode())
        inputs = ([view.aux_victim] if name == "aux" else []) + ([view.own[name]] if name in view.own else [])
        for t in inputs:
            t = t.detach().cpu().contiguous()
            digest.update(f"{t.dtype}{tuple(t.shape)}".encode())
            digest.update(t.numpy().tobytes())
    key = f"{plan.training}:{view.party}:{view.victim}:{view.phase}:{digest.hexdigest()[:16]}"
    stored = _PRIORS.get(key)
    if stored is None or stored[1] != key or _digest(stored[0]) != stored[2]:
        prior = compute(view, plan.seed)
        _PRIORS[key] = stored = (prior, key, _digest(prior))
    return stored[0]
