"""DP-SGD's per-sample gradient norms and clipped sums for a bottom of Linear layers and BatchNorm1d layers on their
running statistics, from one ordinary backward (ghost clipping, Goodfellow 2015; Li et al. 2022): with a_i a layer's
input row and g_i the gradient of its output row for sample i, sample i's Linear weight gradient is g_i a_i^T, of
squared norm |g_i|^2 |a_i|^2, and sum_i s_i g_i a_i^T = (s * G)^T A; a frozen BatchNorm1d's are g_i * xhat_i and g_i.
Exact where rows are computed independently (what embedding-dp's argument needs anyway); per-sample gradients are
never materialised. A :class:`GhostTape` records the layers' inputs during the forward that computed the rows, so the
norms cost one backward and no second forward (embedding-dp's other bottoms take ``torch.func``'s vectorised
per-sample gradients)."""

from __future__ import annotations

import torch
from torch import nn

#: The layers whose per-sample gradients follow from their input and output gradient rows.
LAYERS = (nn.Linear, nn.BatchNorm1d)


def ghost_applies(module: nn.Module) -> bool:
    """Whether every trainable parameter of ``module`` is a Linear's or a BatchNorm1d's on its running statistics."""
    for m in module.modules():
        own = [p for p in m.parameters(recurse=False) if p.requires_grad]
        if own and not (isinstance(m, nn.Linear) or (isinstance(m, nn.BatchNorm1d) and not m.training
                                                     and m.running_mean is not None)):
            return False
    return True


class GhostTape:
    """While entered, records each forward of ``module``'s trainable Linear / BatchNorm1d layers: the input rows, and
    (by a hook on the output, registered at the forward, before an in-place activation can change that tensor) the
    output's gradient rows once a backward reaches them."""

    def __init__(self, module: nn.Module):
        self.layers = [m for m in module.modules()
                       if isinstance(m, LAYERS) and any(p.requires_grad for p in m.parameters(recurse=False))]
        self.params = [p for m in self.layers for p in m.parameters(recurse=False) if p.requires_grad]
        self.seen: list[list] = []
        self.handles: list = []

    def __enter__(self) -> GhostTape:
        """Record a new forward (what an earlier one recorded is dropped)."""
        self.seen = []
        self.handles = [m.register_forward_hook(self._record) for m in self.layers]
        return self

    def __exit__(self, *exc) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    def _record(self, m: nn.Module, inputs: tuple, output: torch.Tensor) -> None:
        entry = [m, inputs[0].detach(), None]
        self.seen.append(entry)
        if output.requires_grad:
            output.register_hook(lambda g, entry=entry: entry.__setitem__(2, g.detach()))

    def norms(self, out: torch.Tensor):
        """Per-sample squared gradient norms (n,) of the scalar ``out`` (computed from the recorded forward) and a
        function of the per-sample scales s (n,) giving each trainable parameter's sum_i s_i grad_i; None where a
        layer was called other than once or on a row that is not a 2-D batch."""
        seen = self.seen
        if len(seen) != len(self.layers) or any(e[1].dim() != 2 for e in seen) or not out.requires_grad:
            return None
        torch.autograd.grad(out, self.params, allow_unused=True)  # fires the output hooks: each layer's gradient rows
        squares = seen[0][1].new_zeros(seen[0][1].shape[0])
        pieces = []  # (parameter, per-sample factor rows or None, gradient rows)
        for m, a, g in seen:
            if isinstance(m, nn.Linear):
                if m.weight.requires_grad:
                    squares = squares + g.square().sum(1) * a.square().sum(1)
                    pieces.append((m.weight, a, g))
            else:
                a = (a - m.running_mean) / torch.sqrt(m.running_var + m.eps)
                if m.weight is not None and m.weight.requires_grad:
                    squares = squares + (g * a).square().sum(1)
                    pieces.append((m.weight, a, g))
            if m.bias is not None and m.bias.requires_grad:
                squares = squares + g.square().sum(1)
                pieces.append((m.bias, None, g))

        def clipped_sums(scale: torch.Tensor) -> dict:
            sums = {}
            for p, a, g in pieces:
                if a is None:
                    sums[p] = scale @ g
                elif p.dim() == 2:
                    sums[p] = (g * scale[:, None]).T @ a
                else:
                    sums[p] = scale @ (g * a)
            return sums

        return squares, clipped_sums


def ghost_grads(module: nn.Module, objective, x: torch.Tensor):
    """:meth:`GhostTape.norms` of ``objective(module(x))``, from a forward of its own."""
    with GhostTape(module) as tape:
        out = objective(module(x))
    return tape.norms(out)
