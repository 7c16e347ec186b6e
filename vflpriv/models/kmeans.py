"""k-means (Lloyd 1982) with k-means++ seeding (Arthur & Vassilvitskii 2007), in torch with an explicit
generator: one-shot VFL's step 3 (the temporary labels, paper 002 Alg. 1 line 28) and the gradient clustering
attack that turns that step against any VFL method (REFERENCE.md §7).

Several seedings are run and the one with the lowest inertia (sum of squared distances to the
nearest centroid) is kept, as scikit-learn's ``n_init`` does. A cluster left empty by an update is
re-seeded at the point farthest from its centroid, so exactly k clusters come back.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Clustering:
    labels: torch.Tensor
    centroids: torch.Tensor
    inertia: float


def _seed(x: torch.Tensor, *, k: int, generator: torch.Generator) -> torch.Tensor:
    """k-means++: each next centroid drawn with probability proportional to D(x)^2."""
    n = x.shape[0]
    first = torch.randint(n, (1,), generator=generator, device=generator.device).to(x.device)
    centroids = [x[first[0]]]
    d2 = (x - centroids[0]).pow(2).sum(1)
    for _ in range(1, k):
        weights = d2 if float(d2.sum()) > 0 else torch.ones_like(d2)
        nxt = torch.multinomial(weights.to(generator.device), 1, generator=generator).to(x.device)[0]
        centroids.append(x[nxt])
        d2 = torch.minimum(d2, (x - x[nxt]).pow(2).sum(1))
    return torch.stack(centroids)


def _lloyd(x: torch.Tensor, centroids: torch.Tensor, *, iterations: int) -> Clustering:
    k = centroids.shape[0]
    for _ in range(iterations):
        labels = torch.cdist(x, centroids).argmin(1)
        members = torch.nn.functional.one_hot(labels, k).to(x.dtype)  # [n, k]; a matmul beats index_add_ here
        counts = torch.bincount(labels, minlength=k)
        sums = members.T @ x
        new = sums / counts.clamp_min(1)[:, None].to(x.dtype)
        for empty in (counts == 0).nonzero().flatten().tolist():
            far = (x - new[labels]).pow(2).sum(1).argmax()
            new[empty] = x[far]
            labels[far] = empty
        if torch.equal(new, centroids):
            break
        centroids = new
    d = torch.cdist(x, centroids)
    labels = d.argmin(1)
    return Clustering(labels, centroids, float(d.gather(1, labels[:, None]).pow(2).sum()))


def kmeans(x: torch.Tensor, *, k: int, generator: torch.Generator, n_init: int = 10, iterations: int = 100) -> Clustering:
    """Best of ``n_init`` k-means runs on the rows of ``x`` (needs at least k rows)."""
    x = x.double()
    runs = [_lloyd(x, _seed(x, k=k, generator=generator), iterations=iterations) for _ in range(n_init)]
    return min(runs, key=lambda r: r.inertia)


def kmeans_from(x: torch.Tensor, centroids: torch.Tensor, *, iterations: int = 100) -> Clustering:
    """One k-means run on the rows of ``x`` from the given initial ``centroids`` (scikit-learn's ``init=array``)."""
    return _lloyd(x.double(), centroids.double().clone(), iterations=iterations)
