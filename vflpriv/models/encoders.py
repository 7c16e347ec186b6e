"""Bottom encoders (REFERENCE.md §2): MLP for tabular parties, a small CNN for images.

Categorical leading columns (``PartySpec.cardinalities``) go through one embedding table per field.
Parameters are initialised from an explicit generator so a seed fixes every weight.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from vflpriv.config.schema import ModelConfig
from vflpriv.data.base import PartySpec


def mlp_block(in_dim: int, out_dim: int) -> nn.Sequential:
    """Linear -> BatchNorm -> ReLU, the unit of the FedHSSL tabular encoders."""
    return nn.Sequential(nn.Linear(in_dim, out_dim), nn.BatchNorm1d(out_dim), nn.ReLU(inplace=True))


class TabularInput(nn.Module):
    """Embeds categorical leading columns and concatenates them with the numeric ones."""

    def __init__(self, spec: PartySpec, *, embedding_dim: int):
        super().__init__()
        self.n_cat = spec.n_categorical
        self.embeddings = nn.ModuleList(nn.Embedding(c, embedding_dim) for c in spec.cardinalities)
        self.out_dim = math.prod(spec.shape) - self.n_cat + self.n_cat * embedding_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        if not self.n_cat:
            return x
        idx = x[:, : self.n_cat].long()
        cats = [emb(idx[:, j]) for j, emb in enumerate(self.embeddings)]
        return torch.cat([*cats, x[:, self.n_cat :]], dim=1)


class MLPEncoder(nn.Module):
    """[Linear -> BN -> ReLU] x 2: in -> hidden -> out."""

    def __init__(self, spec: PartySpec, *, hidden: int, out_dim: int, embedding_dim: int):
        super().__init__()
        self.input = TabularInput(spec, embedding_dim=embedding_dim)
        self.layers = nn.Sequential(mlp_block(self.input.out_dim, hidden), mlp_block(hidden, out_dim))
        self.out_dim = out_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(self.input(x))


class CNNEncoder(nn.Module):
    """Three conv blocks and global pooling: a CPU-sized stand-in for the papers' ResNet-18. Channels-last
    tensors (weights from ``build_encoder``, inputs here): oneDNN's fast layout on CPU (benchmarks/allocator.py)."""

    def __init__(self, spec: PartySpec, *, out_dim: int, width: int = 32):
        super().__init__()
        channels = spec.shape[0]
        self.features = nn.Sequential(
            nn.Conv2d(channels, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, 2 * width, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(2 * width), nn.ReLU(inplace=True),
            nn.Conv2d(2 * width, 4 * width, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(4 * width), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.head = mlp_block(4 * width, out_dim)
        self.out_dim = out_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x.contiguous(memory_format=torch.channels_last)))


def encoder_arch(spec: PartySpec, config: ModelConfig) -> str:
    """``auto`` picks the CNN for images of at least 16 px per side, the MLP otherwise."""
    if config.encoder != "auto":
        return config.encoder
    return "cnn" if spec.modality == "image" and min(spec.shape[-2:]) >= 16 else "mlp"


def build_encoder(spec: PartySpec, config: ModelConfig, *, generator: torch.Generator) -> nn.Module:
    """A freshly initialised bottom encoder for one party, output ``[batch, config.out_dim]``."""
    arch = encoder_arch(spec, config)
    if arch == "cnn":
        cnn = CNNEncoder(spec, out_dim=config.out_dim)
        return init_parameters(cnn, generator=generator).to(memory_format=torch.channels_last)
    module = MLPEncoder(spec, hidden=config.hidden, out_dim=config.out_dim, embedding_dim=config.cat_embedding)
    return init_parameters(module, generator=generator)


def init_parameters(module: nn.Module, *, generator: torch.Generator) -> nn.Module:
    """PyTorch's default initialisation, drawn from ``generator`` instead of the global RNG, on the generator's
    device (a CUDA stream may initialise a module still on the CPU, and the reverse); the module stays where it is."""
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            _draw(m.weight, generator, lambda t: nn.init.kaiming_uniform_(t, a=math.sqrt(5), generator=generator))
            if m.bias is not None:
                fan_in = m.weight[0].numel()
                bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
                _draw(m.bias, generator, lambda t, b=bound: nn.init.uniform_(t, -b, b, generator=generator))
        elif isinstance(m, nn.Embedding):
            _draw(m.weight, generator, lambda t: nn.init.normal_(t, generator=generator))
    return module


def _draw(parameter: nn.Parameter, generator: torch.Generator, fill) -> None:
    """``fill`` ``parameter`` in place with draws made on ``generator``'s device."""
    if parameter.device == generator.device:
        fill(parameter)
        return
    with torch.no_grad():
        parameter.copy_(fill(torch.empty(parameter.shape, dtype=parameter.dtype, device=generator.device)))
