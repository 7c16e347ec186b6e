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


#: Each party's camera: the share of the image side it sees (a zoom), where (a shift), at what angle (degrees).
VIEW_SCALE = (0.6, 0.9)
VIEW_ROTATION = 15.0


def image_views(images: torch.Tensor, parties: int, *, seed: int, chunk: int = 8192) -> list[torch.Tensor]:
    """Every party a full view of each ``[n, C, H, W]`` image through its own camera: a zoom to a random share of
    the side in :data:`VIEW_SCALE`, a random shift within the image and a rotation within +-:data:`VIEW_ROTATION`
    degrees, drawn per party and per image from ``seed`` (fixed: the data do not change between runs), resampled
    bilinearly to H x W. The parties hold independent views of one object that share its label, as the FedHSSL
    paper's image parties do (ModelNet views, BHI patient pairs), instead of adjacent halves."""
    n = images.shape[0]
    out = []
    for party in range(parties):
        g = torch.Generator().manual_seed(seed * 1000 + party)
        low, high = VIEW_SCALE
        scale = low + (high - low) * torch.rand(n, generator=g, device=g.device)
        angle = ((torch.rand(n, generator=g, device=g.device) * 2 - 1) * VIEW_ROTATION).deg2rad()
        room = 1.0 - scale  # the crop stays inside the image: its centre within +-(1 - scale) in [-1, 1] units
        shift = (torch.rand(n, 2, generator=g, device=g.device) * 2 - 1) * room[:, None]
        theta = torch.zeros(n, 2, 3)
        theta[:, 0, 0], theta[:, 0, 1] = scale * angle.cos(), -scale * angle.sin()
        theta[:, 1, 0], theta[:, 1, 1] = scale * angle.sin(), scale * angle.cos()
        theta[:, :, 2] = shift
        views = []
        for rows in torch.arange(n).split(chunk):
            grid = torch.nn.functional.affine_grid(theta[rows], [len(rows), *images.shape[1:]], align_corners=False)
            views.append(torch.nn.functional.grid_sample(images[rows].float(), grid, mode="bilinear",
                                                         padding_mode="zeros", align_corners=False))
        out.append(torch.cat(views) if views else images.float()[:0])
    return out
