"""Networks that map an embedding back to the features it was computed from: the decoders of a feature-inference
adversary (``vflpriv.attacks.features``) and of a victim that imagines one (``fi-adversarial``'s attacker-aware
training), so both use the same architectures.

- :class:`MLPDecoder`: VFLAIR's TBM decoder (``src/evaluates/attacks/ResSFL.py``, used for every dataset there):
  in -> 600 -> LayerNorm -> ReLU -> 200 -> LayerNorm -> ReLU -> 100 -> LayerNorm -> ReLU -> d -> Sigmoid.
- :class:`ConvDecoder`: for image victims, in ResSFL's style (its ``conv_normN*C*`` decoders: transposed
  convolutions doubling the resolution, Sigmoid output): Linear -> (C, H/4, W/4) -> ReLU -> ConvT(x2) -> BatchNorm ->
  ReLU -> ConvT(x2) -> Sigmoid, cropped to the image (ResSFL starts from a conv feature map; vflpriv's embeddings are
  vectors, hence the Linear).

``build_decoder("auto", ...)`` picks the conv decoder for images of at least 16 px a side (where vflpriv's encoder is
a CNN too), the MLP otherwise (the 8 x 4 digit halves, tabular data).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from vflpriv.data.base import PartySpec
from vflpriv.models.encoders import init_parameters


class MLPDecoder(nn.Module):
    """VFLAIR's TBM decoder, output reshaped to ``shape`` (one sample's)."""

    def __init__(self, in_dim: int, shape: tuple[int, ...]):
        super().__init__()
        widths, layers = [in_dim, 600, 200, 100], []
        for a, b in zip(widths, widths[1:]):
            layers += [nn.Linear(a, b), nn.LayerNorm(b), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.Linear(widths[-1], math.prod(shape)), nn.Sigmoid())
        self.shape = shape

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """Its layers' functions called directly: the same operations, bit for bit, without 14 module calls' overhead
        (a twentieth of a fit on 29 known samples; ``benchmarks/results/feature_attack_cost.md``). Hooks registered
        on its inner layers are therefore not called; hooks on the decoder itself are."""
        layers, h = self.net, h.flatten(1)
        for i in range(0, len(layers) - 2, 3):
            linear, norm = layers[i], layers[i + 1]
            h = torch.relu(F.layer_norm(F.linear(h, linear.weight, linear.bias), norm.normalized_shape, norm.weight,
                                        norm.bias, norm.eps))
        last = layers[-2]
        return torch.sigmoid(F.linear(h, last.weight, last.bias)).reshape(-1, *self.shape)

    @torch.no_grad()
    def mse_gradients(self, h: torch.Tensor, target: torch.Tensor, *, with_input: bool = False
                      ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The mean squared error of its output on ``h`` against ``target``, and every parameter's gradient of it (in
        ``parameters()`` order; with ``with_input``, ``h``'s gradient first, as fi-adversarial's victim needs it): the
        backward pass written out with the kernels autograd calls for these layers, in its order, so bit for bit
        autograd's gradients (tested), without building and walking a graph (a quarter of the forward and backward's
        time on 29 known samples: ``benchmarks/results/feature_attack_cost.md``)."""
        aten, layers = torch.ops.aten, self.net
        blocks = [(layers[i], layers[i + 1]) for i in range(0, len(layers) - 2, 3)]
        inputs, saved = [h.flatten(1)], []
        for linear, norm in blocks:
            z = F.linear(inputs[-1], linear.weight, linear.bias)
            normed, mean, rstd = aten.native_layer_norm(z, list(norm.normalized_shape), norm.weight, norm.bias,
                                                        norm.eps)
            saved.append((z, mean, rstd))
            inputs.append(torch.relu(normed))
        last = layers[-2]
        out = torch.sigmoid(F.linear(inputs[-1], last.weight, last.bias))
        flat = target.reshape(out.shape)
        loss = aten.mse_loss(out, flat, 1)  # reduction 1: the mean
        grad = aten.sigmoid_backward(aten.mse_loss_backward(torch.ones_like(loss), out, flat, 1), out)
        grads = [grad.t().mm(inputs[-1]), grad.sum(0)]
        for k in range(len(blocks) - 1, -1, -1):
            (linear, norm), (z, mean, rstd) = blocks[k], saved[k]
            grad = aten.threshold_backward(grad.mm(layers[3 * k + 3].weight if k + 1 < len(blocks) else last.weight),
                                           inputs[k + 1], 0)
            grad, g_norm, b_norm = aten.native_layer_norm_backward(
                grad, z, list(norm.normalized_shape), mean, rstd, norm.weight, norm.bias, [True, True, True])
            grads = [grad.t().mm(inputs[k]), grad.sum(0), g_norm, b_norm, *grads]
        if with_input:
            grads = [grad.mm(blocks[0][0].weight).reshape(h.shape), *grads]
        return loss, grads


class ConvDecoder(nn.Module):
    """Transposed-convolution decoder to a (C, H, W) image, ResSFL-style."""

    def __init__(self, in_dim: int, shape: tuple[int, ...], *, width: int = 64):
        super().__init__()
        channels, height, wide = shape
        self.start = (width, math.ceil(height / 4), math.ceil(wide / 4))
        self.shape = shape
        self.project = nn.Sequential(nn.Linear(in_dim, math.prod(self.start)), nn.ReLU())
        self.up = nn.Sequential(
            nn.ConvTranspose2d(width, width // 2, 4, stride=2, padding=1), nn.BatchNorm2d(width // 2), nn.ReLU(),
            nn.ConvTranspose2d(width // 2, channels, 4, stride=2, padding=1), nn.Sigmoid())

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        x = self.up(self.project(h.flatten(1)).reshape(-1, *self.start))
        return x[:, :, : self.shape[1], : self.shape[2]]


def conv_victim(spec: PartySpec) -> bool:
    """Whether ``decoder=auto`` decodes to this victim's features with the conv decoder."""
    return spec.modality == "image" and len(spec.shape) == 3 and min(spec.shape[-2:]) >= 16


def build_decoder(kind: str, in_dim: int, spec: PartySpec, *, generator: torch.Generator) -> nn.Module:
    """A freshly initialised decoder (``mlp``, ``conv`` or ``auto``) from ``in_dim`` inputs to ``spec``'s samples."""
    use_conv = kind == "conv" or (kind == "auto" and conv_victim(spec))
    net = ConvDecoder(in_dim, spec.shape) if use_conv else MLPDecoder(in_dim, spec.shape)
    return init_parameters(net, generator=generator)
