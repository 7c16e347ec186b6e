"""Photometric views for image SSL: colour jitter and Gaussian blur, batched, per-sample random.

The FedHSSL code's image pipeline (data/bhi_dataset.py, data/modelnet_dataset.py) is
``RandomResizedCrop(scale=(0.3, 1))``, ``RandomApply([ColorJitter(0.3, 0.3, 0.3, 0.1)], p=0.8)``,
``RandomApply([GaussianBlur(sigma in [0.1, 2])], p=0.5)``, ``RandomHorizontalFlip``. These functions are
the two middle steps on a batch ``[n, C, H, W]`` of pixels in [0, 1], with torchvision's semantics, every
draw from the ``torch.Generator`` passed in. Saturation and hue act on 3-channel images only: torchvision
leaves a grayscale image unchanged under both, so on a grayscale set the jitter is brightness and contrast.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

_LUMA = (0.2989, 0.587, 0.114)  # torchvision's rgb_to_grayscale weights


def _gray(x: Tensor) -> Tensor:
    """Per-pixel luma ``[m, 1, H, W]`` (the image itself when it has one channel)."""
    if x.shape[1] == 1:
        return x
    weights = torch.tensor(_LUMA, dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    return (x * weights).sum(dim=1, keepdim=True)


def _blend(x: Tensor, other: Tensor, factor: Tensor) -> Tensor:
    """torchvision's ``_blend``: ``factor * x + (1 - factor) * other``, clamped to [0, 1]."""
    f = factor.view(-1, 1, 1, 1)
    return (f * x + (1 - f) * other).clamp_(0.0, 1.0)


def _brightness(x: Tensor, f: Tensor) -> Tensor:
    return _blend(x, torch.zeros_like(x), f)


def _contrast(x: Tensor, f: Tensor) -> Tensor:
    return _blend(x, _gray(x).mean(dim=(1, 2, 3), keepdim=True), f)


def _saturation(x: Tensor, f: Tensor) -> Tensor:
    return _blend(x, _gray(x), f)


def _hue(x: Tensor, shift: Tensor) -> Tensor:
    """Rotate the hue by ``shift`` (fraction of a turn, per sample) through HSV, as torchvision's tensor path."""
    maxc, _ = x.max(dim=1)
    minc, _ = x.min(dim=1)
    delta = maxc - minc
    s = torch.where(maxc > 0, delta / maxc.clamp_min(1e-12), torch.zeros_like(maxc))
    safe = torch.where(delta > 0, delta, torch.ones_like(delta))
    r, g, b = ((maxc - c) / safe for c in x.unbind(dim=1))
    h = torch.where(maxc == x[:, 0], b - g, torch.where(maxc == x[:, 1], 2.0 + r - b, 4.0 + g - r))
    h = torch.where(delta > 0, (h / 6.0) % 1.0, torch.zeros_like(h))
    h = (h + shift.view(-1, 1, 1)) % 1.0
    sector = torch.floor(h * 6.0)
    frac = h * 6.0 - sector
    v = maxc
    p, q, t = v * (1 - s), v * (1 - s * frac), v * (1 - s * (1 - frac))
    table = torch.stack([torch.stack(c, dim=1) for c in
                         ((v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q))])  # [6, m, 3, H, W]
    index = (sector.long() % 6).unsqueeze(0).unsqueeze(2).expand(1, -1, 3, -1, -1)
    return table.gather(0, index).squeeze(0)


_STEPS = (_brightness, _contrast, _saturation, _hue)


def color_jitter(
    x: Tensor, *, strengths: tuple[float, float, float, float], p: float, generator: torch.Generator
) -> Tensor:
    """``RandomApply([ColorJitter(*strengths)], p)`` on each sample: brightness, contrast, saturation
    factors ~ U[max(0, 1 - s), 1 + s], hue shift ~ U[-s, s], applied in a random order per sample
    (torchvision draws the order per call, i.e. per image). Saturation and hue skip 1-channel images."""
    n = x.shape[0]
    u = torch.rand(6, n, generator=generator, device=generator.device, dtype=x.dtype).to(x.device)
    order = torch.rand(n, 4, generator=generator, device=generator.device).argsort(dim=1).to(x.device)
    applied = u[5] < p
    factors = []
    for k, s in enumerate(strengths):
        lo = -s if k == 3 else max(0.0, 1.0 - s)
        hi = s if k == 3 else 1.0 + s
        factors.append(lo + (hi - lo) * u[k])
    active = [k for k, s in enumerate(strengths) if s > 0 and (k < 2 or x.shape[1] == 3)]
    out = x.clone()
    for position in range(4):
        for k in active:
            rows = torch.nonzero(applied & (order[:, position] == k)).squeeze(1)
            if rows.numel():
                out[rows] = _STEPS[k](out[rows], factors[k][rows])
    return out


def gaussian_blur(x: Tensor, *, sigma: tuple[float, float], p: float, generator: torch.Generator) -> Tensor:
    """``RandomApply([GaussianBlur(sigma ~ U[sigma])], p)`` on each sample: a separable Gaussian of
    radius ceil(3 * sigma_max) pixels, edges replicated (PIL extends the border, as the code's PIL blur)."""
    n, c, h, w = x.shape
    u = torch.rand(2, n, generator=generator, device=generator.device, dtype=x.dtype).to(x.device)
    rows = torch.nonzero(u[1] < p).squeeze(1)
    if rows.numel() == 0:
        return x
    s = (sigma[0] + (sigma[1] - sigma[0]) * u[0][rows]).view(-1, 1)
    radius = math.ceil(3 * sigma[1])
    taps = torch.arange(-radius, radius + 1, dtype=x.dtype, device=x.device)
    kernel = torch.exp(-0.5 * (taps / s) ** 2)
    kernel = (kernel / kernel.sum(dim=1, keepdim=True)).repeat_interleave(c, dim=0)  # [m * C, 2r + 1]
    m = rows.numel()
    y = F.pad(x[rows].reshape(1, m * c, h, w), (radius,) * 4, mode="replicate")
    y = F.conv2d(y, kernel.view(m * c, 1, 1, -1), groups=m * c)
    y = F.conv2d(y, kernel.view(m * c, 1, -1, 1), groups=m * c)
    out = x.clone()
    out[rows] = y.view(m, c, h, w)
    return out
