"""Random views for SSL pretraining (FedHSSL §V-A / REFERENCE §5; SCARF, VFLHLP Eq. 5-6).

Every random draw comes from the ``torch.Generator`` passed in (it must live on the data's
device), never from the global RNG, so a seed fixes a view exactly. Inputs are never modified.
Tabular corruption picks exactly ``round(rate * d)`` features per sample (halves round up),
independently for each sample, as the FedHSSL and SCARF code do, rather than Bernoulli(rate)
per feature.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from vflpriv.common.errors import ConfigError
from vflpriv.data.base import PartySpec
from vflpriv.models.ssl.photometric import color_jitter, gaussian_blur

Augment = Callable[[Tensor, torch.Generator], Tensor]
"""One party's view function: ``aug(x, generator) -> x'`` with the shape of ``x``."""


@dataclass(frozen=True)
class FeatureRanges:
    """Per-column min/max of a tabular party's numeric columns, fitted once on its own data."""

    low: Tensor
    high: Tensor
    n_categorical: int

    @classmethod
    def fit(cls, x: Tensor, spec: PartySpec) -> FeatureRanges:
        """Column-wise min and max of ``x`` ([n, d]) over the columns after the categorical ones."""
        if spec.modality != "tabular":
            raise ConfigError(f"FeatureRanges needs a tabular party, got {spec.modality!r}")
        numeric = x[:, spec.n_categorical :]
        return cls(numeric.amin(dim=0), numeric.amax(dim=0), spec.n_categorical)


def _check_rate(rate: float) -> None:
    if not 0.0 <= rate <= 1.0:
        raise ConfigError(f"corruption rate must lie in [0, 1], got {rate}")


def _choose(x: Tensor, rate: float, generator: torch.Generator) -> Tensor:
    """Boolean mask [n, d] with exactly round(rate * d) True entries in each row."""
    n, d = x.shape
    k = math.floor(rate * d + 0.5)
    scores = torch.rand(n, d, generator=generator, device=generator.device).to(x.device)
    chosen = scores.topk(k, dim=1).indices
    return torch.zeros(n, d, dtype=torch.bool, device=x.device).scatter_(1, chosen, True)


def corrupt_tabular(
    x: Tensor, ranges: FeatureRanges, *, rate: float = 0.3, generator: torch.Generator
) -> Tensor:
    """FedHSSL corruption: chosen numeric features -> Uniform(min_j, max_j), categorical -> 0.

    Index 0 is the reserved "unknown" category (``PartySpec``). Default rate 0.3 (FedHSSL §V-A).
    """
    _check_rate(rate)
    c = ranges.n_categorical
    if x.shape[1] != c + ranges.low.shape[0]:
        fitted = c + ranges.low.shape[0]
        raise ValueError(f"x has {x.shape[1]} columns, ranges were fitted on {fitted}")
    mask = _choose(x, rate, generator)
    u = torch.rand(x.shape[0], x.shape[1] - c, generator=generator, device=generator.device, dtype=x.dtype).to(x.device)
    numeric = ranges.low + u * (ranges.high - ranges.low)
    replacement = torch.cat([torch.zeros_like(x[:, :c]), numeric], dim=1)
    return torch.where(mask, replacement, x)


def scarf_corrupt(
    x: Tensor, pool: Tensor, *, rate: float = 0.6, generator: torch.Generator
) -> Tensor:
    """SCARF corruption (VFLHLP Eq. 5-6): chosen entries take the same column's value from a row of
    ``pool`` drawn uniformly, independently per entry, i.e. a draw from that feature's empirical
    marginal. Categorical columns thus receive valid categories. Default rate 0.6 (SCARF).
    """
    _check_rate(rate)
    if pool.shape[1:] != x.shape[1:]:
        raise ValueError(f"pool rows {tuple(pool.shape[1:])} != x rows {tuple(x.shape[1:])}")
    mask = _choose(x, rate, generator)
    rows = torch.randint(pool.shape[0], x.shape, generator=generator, device=generator.device).to(x.device)
    return torch.where(mask, pool.gather(0, rows), x)


def augment_image(
    x: Tensor,
    *,
    generator: torch.Generator,
    crop_scale: tuple[float, float] = (0.5, 1.0),
    flip: bool = True,
) -> Tensor:
    """SimSiam-style random resized crop + horizontal flip for a batch ``[n, C, H, W]``.

    Each sample gets its own box: area fraction ~ U(crop_scale), aspect ratio log-uniform in
    [3/4, 4/3] (in pixels, as torchvision) then clipped so the box fits; it is resampled to
    H x W by bilinear ``grid_sample`` over a per-sample affine grid, whose x-scale is negated to
    flip with probability 1/2. One batched op, so it also suits tiny images (1x8x4).
    """
    return augment_images([x], generator=generator, crop_scale=crop_scale, flip=flip)[0]


def augment_images(
    xs: list[Tensor],
    *,
    generator: torch.Generator,
    crop_scale: tuple[float, float] = (0.5, 1.0),
    flip: bool = True,
) -> list[Tensor]:
    """:func:`augment_image` of each batch in ``xs`` (same image shape), in one resampling: the same draws, in the
    same order, and the same values as one call per batch, for a loop that augments several batches per step."""
    out = _resampled(xs, generator=generator, crop_scale=crop_scale, flip=flip)
    return [out] if len(xs) == 1 else list(out.split([b.shape[0] for b in xs]))


def _resampled(xs: list[Tensor], *, generator: torch.Generator, crop_scale: tuple[float, float], flip: bool) -> Tensor:
    """The batches of :func:`augment_images` augmented and concatenated."""
    lo, hi = crop_scale
    if not 0.0 < lo <= hi <= 1.0:
        raise ConfigError(f"crop_scale must satisfy 0 < low <= high <= 1, got {crop_scale}")
    x = xs[0] if len(xs) == 1 else torch.cat(xs)
    h, w = x.shape[-2:]
    draws = [torch.rand(5, b.shape[0], generator=generator, device=generator.device, dtype=x.dtype) for b in xs]
    u = (draws[0] if len(draws) == 1 else torch.cat(draws, dim=1)).to(x.device)  # drawn on the CPU stream, moved
    area = lo + (hi - lo) * u[0]
    ratio = torch.exp(math.log(3 / 4) + math.log(16 / 9) * u[1])
    ratio = torch.minimum(torch.maximum(ratio, area * w / h), w / (area * h))  # box must fit
    sw = torch.sqrt(area * ratio * h / w).clamp(max=1.0)  # box width / image width
    sh = torch.sqrt(area / ratio * w / h).clamp(max=1.0)  # box height / image height
    sign = torch.where(u[4] < 0.5, -1.0, 1.0) if flip else torch.ones_like(sw)
    grid = box_grid(sw * sign, (1 - sw) * (2 * u[2] - 1), sh, (1 - sh) * (2 * u[3] - 1), h=h, w=w)  # box centres
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


def box_grid(scale_x: Tensor, shift_x: Tensor, scale_y: Tensor, shift_y: Tensor, *, h: int, w: int) -> Tensor:
    """``F.affine_grid(theta, [n, C, h, w], align_corners=False)`` for the axis-aligned thetas [[scale_x, 0, shift_x],
    [0, scale_y, shift_y]], the same values (tested), each axis as one product and sum instead of a batched matmul:
    grid[k, i, j] = (scale_x[k] x_j + shift_x[k], scale_y[k] y_i + shift_y[k]), x and y the pixel centres in [-1, 1]."""
    n = scale_x.shape[0]
    xs, ys = (torch.linspace(-1, 1, m, dtype=scale_x.dtype, device=scale_x.device) * (m - 1) / m for m in (w, h))
    gx = scale_x[:, None] * xs + shift_x[:, None]  # rounded after the product, then the sum (no fused multiply-add)
    gy = scale_y[:, None] * ys + shift_y[:, None]
    return torch.stack([gx[:, None, :].expand(n, h, w), gy[:, :, None].expand(n, h, w)], dim=-1)


def two_views(
    x: Tensor, augment: Augment, *, clean_first: bool = False, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """The pair (v1, v2) = (T(x), T(x)); with ``clean_first`` v1 = x (FedHSSL code option)."""
    v1 = x if clean_first else augment(x, generator)
    return v1, augment(x, generator)


def stacked_views(x: Tensor, augment: Augment, *, clean_first: bool = False, generator: torch.Generator) -> Tensor:
    """``torch.cat(two_views(...))``: [v1; v2], 2n rows, the same values from the same draws in the same order; both
    views in one resampling where ``augment`` can (an :class:`ImageViews`), which SSL steps then feed as one batch."""
    if clean_first:
        return torch.cat([x, augment(x, generator)])
    stacked = getattr(augment, "stacked", None)
    if stacked is not None:
        return stacked([x, x], generator)
    return torch.cat([augment(x, generator), augment(x, generator)])


@dataclass(frozen=True)
class ImageViews:
    """An image party's view function (``Augment``): :func:`augment_image`, then :func:`color_jitter` when a jitter
    strength is positive and :func:`gaussian_blur` when ``blur_sigma`` is; ``stacked`` augments several batches."""

    crop_scale: tuple[float, float] = (0.5, 1.0)
    flip: bool = True
    jitter: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    jitter_p: float = 0.8
    blur_sigma: tuple[float, float] = (0.0, 0.0)
    blur_p: float = 0.5

    def __call__(self, x: Tensor, generator: torch.Generator) -> Tensor:
        x = augment_image(x, generator=generator, crop_scale=self.crop_scale, flip=self.flip)
        return self._photometric(x, generator)

    def stacked(self, xs: list[Tensor], generator: torch.Generator) -> Tensor:
        """``torch.cat([self(x, generator) for x in xs])``, the same draws in the same order: the crops in one
        resampling (:func:`augment_images`) where no photometric step draws between one batch's crop and the next's."""
        if any(s > 0 for s in self.jitter) or self.blur_sigma[1] > 0:
            return torch.cat([self(x, generator) for x in xs])
        return _resampled(xs, generator=generator, crop_scale=self.crop_scale, flip=self.flip)

    def _photometric(self, x: Tensor, generator: torch.Generator) -> Tensor:
        if any(s > 0 for s in self.jitter):
            x = color_jitter(x, strengths=self.jitter, p=self.jitter_p, generator=generator)
        if self.blur_sigma[1] > 0:
            x = gaussian_blur(x, sigma=self.blur_sigma, p=self.blur_p, generator=generator)
        return x


def make_augmenter(
    spec: PartySpec,
    x_train: Tensor,
    *,
    tabular: Literal["uniform", "scarf"] = "uniform",
    rate: float | None = None,
    crop_scale: tuple[float, float] = (0.5, 1.0),
    flip: bool = True,
    jitter: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0),
    jitter_p: float = 0.8,
    blur_sigma: tuple[float, float] = (0.0, 0.0),
    blur_p: float = 0.5,
) -> Augment:
    """One party's ``aug(x, generator)``, fitted on its training tensor.

    Image parties get an :class:`ImageViews`: ``augment_image``, then ``color_jitter`` when a jitter strength is
    positive and ``gaussian_blur`` when ``blur_sigma`` is (the FedHSSL code's order: crop, jitter, blur, flip; the flip
    commutes with both). Tabular parties get ``corrupt_tabular`` with ranges fitted
    on ``x_train`` (``tabular="uniform"``, FedHSSL, default rate 0.3) or ``scarf_corrupt`` with
    ``x_train`` as the pool (``tabular="scarf"``, VFLHLP, default rate 0.6).
    """
    if spec.modality == "image":
        return ImageViews(crop_scale, flip, jitter, jitter_p, blur_sigma, blur_p)
    if tabular not in ("uniform", "scarf"):
        raise ConfigError(f"unknown tabular augmentation {tabular!r}; choose 'uniform' or 'scarf'")
    r = (0.3 if tabular == "uniform" else 0.6) if rate is None else rate
    _check_rate(r)
    if tabular == "scarf":
        def scarf_aug(x: Tensor, generator: torch.Generator) -> Tensor:
            return scarf_corrupt(x, x_train, rate=r, generator=generator)

        return scarf_aug
    ranges = FeatureRanges.fit(x_train, spec)

    def uniform_aug(x: Tensor, generator: torch.Generator) -> Tensor:
        return corrupt_tabular(x, ranges, rate=r, generator=generator)

    return uniform_aug
