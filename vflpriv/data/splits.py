"""Column splits shared by loaders: image halves/quadrants and contiguous feature blocks."""

from __future__ import annotations

import torch

from vflpriv.common.errors import ConfigError


def image_parts(images: torch.Tensor, parties: int) -> list[torch.Tensor]:
    """Split ``[n, C, H, W]`` images into left/right halves (2 parties) or quadrants (4 parties).

    Quadrant order is top-left, top-right, bottom-left, bottom-right, so party 0 (active) holds the
    top-left quadrant, as in the 4-party setting of the FedHSSL paper's image experiments.
    """
    h, w = images.shape[-2:]
    if parties == 1:
        return [images]
    if parties == 2:
        return [images[..., : w // 2].contiguous(), images[..., w // 2 :].contiguous()]
    if parties == 4:
        top, bottom = images[..., : h // 2, :], images[..., h // 2 :, :]
        return [
            part[..., cols].contiguous()
            for part in (top, bottom)
            for cols in (slice(0, w // 2), slice(w // 2, None))
        ]
    raise ConfigError(f"image datasets split into 1, 2 or 4 parties, not {parties}")


def column_blocks(x: torch.Tensor, parties: int) -> list[torch.Tensor]:
    """Split ``[n, d]`` features into ``parties`` contiguous, near-equal column blocks."""
    d = x.shape[1]
    if not 1 <= parties <= d:
        raise ConfigError(f"cannot split {d} features among {parties} parties (1..{d})")
    return [block.contiguous() for block in torch.tensor_split(x, parties, dim=1)]
