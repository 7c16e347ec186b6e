"""Feature-reconstruction scores, as the anchors compute them (../shared/ANCHORS-FEATURES.md §1.2), on features
min-max scaled to [0, 1] on the training data:

- MSE: ``mean((x_hat - x)^2)`` over all elements (VFLAIR, SecretFlow, Luo et al.), and per target (the paired test's
  unit) and per feature (Luo's ``GeneratorTrainer.test``, SecretFlow's ``loss_per_feature``: a few unrecovered
  features hide behind a good mean);
- PSNR (images): ``20 log10(1 / sqrt(MSE))`` on [0, 1] (VFLAIR ``MSE_PSNR``, SecretFlow CAFE), from the MSE of all
  elements;
- SSIM (images): windowed SSIM as ResSFL computes it (``pytorch_ssim.SSIM()``: an 11x11 Gaussian window of sigma
  1.5, zero-padded by 5, per channel, C1 = 0.01^2, C2 = 0.03^2 for data in [0, 1], the map's mean), per image; not
  VFLAIR's window-free ``cal_ssim``, which it never calls;
- exact match (binary and categorical columns): SecretFlow's ``mean(|x_hat - x| < 1e-5)`` after the guess is snapped
  to the nearest of the column's values (the adversary knows a binary column is binary, so the snap is its own
  post-processing), the mean over those columns and each column's rate (SecretFlow reports the max);
- VFLAIR's attack performance ``AP = max(0, 1 - MSE)`` (its DCS input).

Pure tensor functions: the runner applies them to the truth it alone holds.
"""

from __future__ import annotations

import math

import torch

SSIM_WINDOW, SSIM_SIGMA = 11, 1.5
SSIM_C1, SSIM_C2 = 0.01**2, 0.03**2
EXACT = 1e-5


def fit_scale(x: torch.Tensor, *, image: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(low, span) of a min-max scaling fitted on training rows ``x``: per feature for tabular data, one range for an
    image (its pixels share a scale; per-pixel ranges would stretch a border pixel that is nearly always 0). A
    constant feature gets span 1 (it maps to 0)."""
    flat = x.detach().double().flatten(1)
    if image:
        low, high = flat.min(), flat.max()
        low, high = low.expand(flat.shape[1]), high.expand(flat.shape[1])
    else:
        low, high = flat.min(0).values, flat.max(0).values
    span = high - low
    return low, torch.where(span > 0, span, torch.ones_like(span))


def scaled(x: torch.Tensor, low: torch.Tensor, span: torch.Tensor) -> torch.Tensor:
    """``x`` on the scale of :func:`fit_scale` (not clipped: a test value beyond the training range stays beyond)."""
    flat = (x.detach().double().flatten(1) - low.to(x.device)) / span.to(x.device)
    return flat.reshape(x.shape).float()


def rescaled(x: torch.Tensor, source: tuple[torch.Tensor, torch.Tensor], target: tuple[torch.Tensor, torch.Tensor]
             ) -> torch.Tensor:
    """``x`` given on the scale ``source`` (a :func:`fit_scale`) put on the scale ``target``."""
    (s_low, s_span), (t_low, t_span) = source, target
    flat = x.detach().double().flatten(1) * s_span.to(x.device) + s_low.to(x.device)
    return ((flat - t_low.to(x.device)) / t_span.to(x.device)).reshape(x.shape).float()


def per_target_mse(guess: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    """Each target's MSE over its elements (shape: targets)."""
    _check(guess, truth)
    return (guess.double() - truth.double()).pow(2).flatten(1).mean(1)


def mse(guess: torch.Tensor, truth: torch.Tensor) -> float:
    """The MSE over all elements (every target has as many, so it is the mean of :func:`per_target_mse`)."""
    return float(per_target_mse(guess, truth).mean())


def per_feature_mse(guess: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    """Each feature's MSE over the targets (shape: the flattened feature count)."""
    _check(guess, truth)
    return (guess.double() - truth.double()).pow(2).flatten(1).mean(0)


def psnr(error: float) -> float:
    """``20 log10(1 / sqrt(MSE))`` for data in [0, 1]: +inf for an exact reconstruction."""
    return math.inf if error == 0 else -10.0 * math.log10(error)


def ap(error: float) -> float:
    """VFLAIR's attack performance of a feature reconstruction: ``max(0, 1 - MSE)``."""
    return max(0.0, 1.0 - error)


def gaussian_window(size: int = SSIM_WINDOW, sigma: float = SSIM_SIGMA) -> torch.Tensor:
    """pytorch_ssim's window: the outer product of a normalised 1-D Gaussian with itself (size x size)."""
    x = torch.arange(size, dtype=torch.float64) - size // 2
    g = torch.exp(-x.pow(2) / (2 * sigma**2))
    g = g / g.sum()
    return g[:, None] * g[None, :]


def ssim(guess: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    """Per-image windowed SSIM (shape: images) of images (N, C, H, W) in [0, 1], as ``pytorch_ssim.ssim``: the mean of
    :func:`ssim_map` over each image's channels and pixels."""
    return ssim_map(guess, truth).flatten(1).mean(1)


def _blur_matrix(size: int, taps: torch.Tensor) -> torch.Tensor:
    """The (size x size) matrix of a 1-D zero-padded convolution with the centred ``taps`` along one image axis:
    entry (i, j) is the tap at offset j - i (zero beyond the window)."""
    half = taps.numel() // 2
    offset = torch.arange(size, device=taps.device)[None, :] - torch.arange(size, device=taps.device)[:, None] + half
    inside = (offset >= 0) & (offset < taps.numel())
    return torch.where(inside, taps[offset.clamp(0, taps.numel() - 1)], torch.zeros((), dtype=taps.dtype,
                                                                                     device=taps.device))


def ssim_map(guess: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    """The SSIM of each pixel's window (N, C, H, W), zero-padded at the borders as pytorch_ssim's convolution is."""
    _check(guess, truth)
    if guess.dim() != 4:
        raise ValueError(f"SSIM needs images (N, C, H, W), got shape {tuple(guess.shape)}")
    dtype = torch.promote_types(torch.promote_types(guess.dtype, truth.dtype), torch.float32)
    a, b = guess.to(dtype), truth.to(dtype)  # float32 for records (fast), float64 where given (the reference test)
    x = torch.arange(SSIM_WINDOW, dtype=torch.float64, device=a.device) - SSIM_WINDOW // 2
    g = torch.exp(-x.pow(2) / (2 * SSIM_SIGMA**2))
    g = (g / g.sum()).to(dtype)
    # the window is g g^T, so the zero-padded 2-D convolution of an image X is G_H X G_W^T with banded matrices:
    # the five local moments in two batched matrix products (on small images 2-10x faster than conv2d's 11 taps)
    rows, cols = _blur_matrix(a.shape[2], g), _blur_matrix(a.shape[3], g)
    mu_a, mu_b, aa, bb, ab = rows @ torch.stack([a, b, a * a, b * b, a * b]) @ cols.T
    var_a, var_b = aa - mu_a.pow(2), bb - mu_b.pow(2)
    cov = ab - mu_a * mu_b
    num = (2 * mu_a * mu_b + SSIM_C1) * (2 * cov + SSIM_C2)
    den = (mu_a.pow(2) + mu_b.pow(2) + SSIM_C1) * (var_a + var_b + SSIM_C2)
    return num / den


def discrete_levels(x: torch.Tensor, *, categorical: int) -> dict[int, torch.Tensor]:
    """The columns (of the flattened features) that take few values, with those values: the leading ``categorical``
    columns (integer codes) and every column with exactly two values on the rows ``x`` (binary)."""
    flat = x.detach().flatten(1)
    levels = {}
    for j in range(flat.shape[1]):
        values = flat[:, j].unique()
        if j < categorical or values.numel() == 2:
            levels[j] = values
    return levels


def exact_match(guess: torch.Tensor, truth: torch.Tensor, levels: dict[int, torch.Tensor]) -> tuple[float, list[float]]:
    """(mean over the ``levels`` columns, each column's rate) of ``|snap(x_hat) - x| < 1e-5``, ``snap`` the nearest
    of the column's values; NaN and [] without such columns."""
    _check(guess, truth)
    if not levels:
        return math.nan, []
    g, t = guess.flatten(1), truth.flatten(1)
    rates = []
    for j, values in levels.items():
        values = values.to(g.device, g.dtype)
        snapped = values[(g[:, j, None] - values[None, :]).abs().argmin(1)]
        rates.append(float(((snapped - t[:, j]).abs() < EXACT).double().mean()))
    return sum(rates) / len(rates), rates


def _check(guess: torch.Tensor, truth: torch.Tensor) -> None:
    if guess.shape != truth.shape:
        raise ValueError(f"a reconstruction of shape {tuple(guess.shape)} for features of shape {tuple(truth.shape)}")
