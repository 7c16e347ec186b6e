"""The networks of SSL pretraining (FedHSSL §IV-B; REFERENCE.md §2): a party's local encoder split into a
private bottom and the top PMA shares, the pooled encoder a party finetunes, and the online tower
(encoder -> projector -> predictor)."""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor, nn

from vflpriv.common.errors import ConfigError, class_named
from vflpriv.config.schema import ModelConfig
from vflpriv.data.base import PartySpec
from vflpriv.models.encoders import CNNEncoder, MLPEncoder, build_encoder


class LocalEncoder(nn.Module):
    """f_l = top(bottom(x)): the bottom stays private, the top is what PMA shares (FedHSSL §IV-B3)."""

    def __init__(self, bottom: nn.Module, top: nn.Module, out_dim: int):
        super().__init__()
        self.bottom = bottom
        self.top = top
        self.out_dim = out_dim

    def forward(self, x: Tensor) -> Tensor:
        return self.top(self.bottom(x))


class PooledEncoder(nn.Module):
    """A party's finetuning encoder after FedGSSL/FedHSSL: 0.5 f_c(x) + 0.5 f_l(x) (code), or concatenated."""

    def __init__(self, cross: nn.Module, local: nn.Module, pooling: Literal["mean", "concat"] = "mean"):
        super().__init__()
        if pooling not in ("mean", "concat"):
            raise ConfigError(f"unknown pooling {pooling!r}; choose mean or concat")
        self.cross = cross
        self.local = local
        self.pooling = pooling
        self.out_dim = cross.out_dim + local.out_dim if pooling == "concat" else cross.out_dim

    def forward(self, x: Tensor) -> Tensor:
        if self.pooling == "concat":
            return torch.cat([self.cross(x), self.local(x)], dim=1)
        return 0.5 * (self.cross(x) + self.local(x))


def encoder_stages(encoder: nn.Module) -> list[nn.Module]:
    """The encoder as consecutive stages (input side first), for the bottom/top split of f_l.

    MLP: [input + first block, second block]; CNN: [conv1, conv2, conv3 + pooling, head]. An encoder of
    another kind can declare its own split with a ``stages()`` method.
    """
    if hasattr(encoder, "stages"):
        return list(encoder.stages())
    if isinstance(encoder, MLPEncoder):
        layers = list(encoder.layers)
        return [nn.Sequential(encoder.input, layers[0]), *layers[1:]]
    if isinstance(encoder, CNNEncoder):
        f = encoder.features
        return [f[0:3], f[3:6], f[6:], encoder.head]
    raise ConfigError(f"cannot split {class_named(encoder)} into bottom and top; give it a stages() method")


#: Stages shared by PMA when none are given, per encoder kind (others: the last stage).
DEFAULT_TOP_BLOCKS = {CNNEncoder: 3, MLPEncoder: 1}


def build_local_encoder(
    spec: PartySpec, config: ModelConfig, *, top_blocks: int | None = None, generator: torch.Generator
) -> LocalEncoder:
    """f_l of REFERENCE §2 (same architecture as ``build_encoder``), its last ``top_blocks`` stages on top
    (default ``DEFAULT_TOP_BLOCKS`` of the encoder's kind)."""
    encoder = build_encoder(spec, config, generator=generator)
    stages = encoder_stages(encoder)
    if top_blocks is None:
        top_blocks = DEFAULT_TOP_BLOCKS.get(type(encoder), 1)
    if not 1 <= top_blocks < len(stages):
        raise ConfigError(f"pma_top_blocks must lie in 1..{len(stages) - 1} for this encoder, got {top_blocks}")
    return LocalEncoder(nn.Sequential(*stages[:-top_blocks]), nn.Sequential(*stages[-top_blocks:]), encoder.out_dim)


class Tower(nn.Module):
    """Online branch: encoder f, projector g, predictor h (None for MoCo: h = identity)."""

    def __init__(self, encoder: nn.Module, proj: nn.Module, pred: nn.Module | None):
        super().__init__()
        self.encoder = encoder
        self.projector = proj
        self.predictor = pred

    def project(self, x: Tensor) -> Tensor:
        return self.projector(self.encoder(x))

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """(z, p): the projection and the prediction (p = z without a predictor)."""
        _, z, p = self.stages(x)
        return z, p

    def stages(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(h, z, p): the encoder's output (the cut a finetuning embedding comes from), the projection, the
        prediction."""
        h = self.encoder(x)
        z = self.projector(h)
        return h, z, (self.predictor(z) if self.predictor is not None else z)
