"""A surrogate of the victim's bottom model, fitted on the adversary's known pairs (victim features -> the row it
received about them): what ``grn`` and ``fi-inversion`` differentiate through where the adversary holds no copy of the
victim's bottom (black-box: SDAR's and FORA's substitute, ANCHORS-FEATURES.md §2 A1 "a black-box mode using a
surrogate ... trained on aux data").

White-box would need the victim's whole bottom: none of vflpriv's methods gives any role that. FedHSSL's partial model
aggregation shares the top blocks of each party's local encoder with the server (and, averaged, with the other
parties), whose inputs (the outputs of the private lower blocks) no adversary receives, and which finetuning moves
on; so both attacks fit a surrogate, on the same known pairs the decoder learns from.

The surrogate is a generic MLP on the flattened features, d -> 256 -> ReLU -> 256 -> ReLU -> rows (it need not know
the victim's architecture), trained by MSE with Adam.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from vflpriv.attacks.features.decoders import fit_regression
from vflpriv.attacks.features.shared_fits import shared_fit
from vflpriv.engine.adversary import FeatureView
from vflpriv.models.encoders import init_parameters

WIDTH = 256


class Surrogate(nn.Module):
    """An MLP from one sample's features (any shape, flattened) to a received row."""

    def __init__(self, shape: tuple[int, ...], out_dim: int, *, width: int = WIDTH):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(math.prod(shape), width), nn.ReLU(), nn.Linear(width, width),
                                 nn.ReLU(), nn.Linear(width, out_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Its layers' functions called directly (as :class:`~vflpriv.models.decoders.MLPDecoder`): the same
        operations without six module calls per step of the loops that differentiate through it."""
        first, second, last = self.net[1], self.net[3], self.net[5]
        h = torch.relu(F.linear(x.flatten(1), first.weight, first.bias))
        return F.linear(torch.relu(F.linear(h, second.weight, second.bias)), last.weight, last.bias)

    @torch.no_grad()
    def mse_gradients(self, x: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The mean squared error of its output on ``x`` against ``target`` and every parameter's gradient of it (in
        ``parameters()`` order), by the backward pass written out with autograd's kernels in its order: bit for bit
        autograd's gradients (tested), without a graph (as :meth:`MLPDecoder.mse_gradients`)."""
        aten, layers = torch.ops.aten, [self.net[1], self.net[3], self.net[5]]
        inputs = [x.flatten(1)]
        for linear in layers[:-1]:
            inputs.append(torch.relu(F.linear(inputs[-1], linear.weight, linear.bias)))
        out = F.linear(inputs[-1], layers[-1].weight, layers[-1].bias)
        loss = aten.mse_loss(out, target, 1)  # reduction 1: the mean
        grad = aten.mse_loss_backward(torch.ones_like(loss), out, target, 1)
        grads: list[torch.Tensor] = []
        for k in range(len(layers) - 1, -1, -1):
            grads = [grad.t().mm(inputs[k]), grad.sum(0), *grads]
            if k:
                grad = aten.threshold_backward(grad.mm(layers[k].weight), inputs[k], 0)
        return loss, grads


def fit_surrogate(view: FeatureView, *, epochs: int, lr: float, batch_size: int) -> nn.Module:
    """The surrogate bottom fitted on ``view``'s known pairs, frozen in eval mode."""
    rows = view.received["aux"].flatten(1)
    net = init_parameters(Surrogate(view.victim_spec.shape, rows.shape[1]), generator=view.generator).to(view.device)
    shared_fit(fit_regression, net, view.aux_victim, rows, epochs=epochs, lr=lr, batch_size=batch_size,
               generator=view.generator, what="surrogate bottom")
    return net.eval().requires_grad_(False)
