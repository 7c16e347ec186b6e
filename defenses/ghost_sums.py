"""DP-SGD's per-sample gradient norms and clipped sums for a bottom of Linear, Conv2d and BatchNorm1d/2d layers (the
BatchNorms on their running statistics) from one ordinary backward (ghost clipping, Goodfellow 2015; Li et al. 2022;
Opacus' unfold rule for convolutions): with a_i a layer's input row and g_i the gradient of its output row for sample i,
sample i's Linear weight gradient is g_i a_i^T, of squared norm |g_i|^2 |a_i|^2, and sum_i s_i g_i a_i^T = (s * G)^T A;
a frozen BatchNorm's are g_i * xhat_i and g_i (summed over the positions of a BatchNorm2d). A Conv2d's is G_i U_i^T,
with U_i = unfold(a_i) (its kernel's patches, Cin k k x L positions) and G_i its output gradient (Cout x L): its squared
norm is sum_{p,q} (G_i^T G_i)_{pq} (U_i^T U_i)_{pq} (Li et al.'s ghost norm, O(L^2 (Cout + Cin k k))) or, where that
costs more than the gradient itself (L Cout Cin k k: early layers with many positions), |G_i U_i^T|^2 from the
materialised per-sample gradient (Opacus). ``per_sample.GhostTape`` records the layers' inputs during the forward that
computed the rows, so the norms cost one backward and no second forward; that backward forms no weight gradient (Bu et
al. 2023's book-keeping: each layer's input A and output gradient G are kept, and the clipped sum is formed once from
them, A^T diag(s) G for a Linear).

Here, the rules as pure functions of a layer, its recorded input rows a and output gradient rows g (``per_sample.py``
records them), and DP-SGD's noise buffer."""

from __future__ import annotations

import torch
from torch import nn


def sums(recorded: list):
    """The per-sample squared norms and ``clipped_sums`` (see ``per_sample.GhostTape.norms``) from each trainable
    layer's (layer, input rows, output gradient rows)."""
    squares = None
    pieces = []  # (parameter, rule, its operands): how its clipped sum is formed
    for m, a, g in recorded:
        if isinstance(m, nn.Conv2d):
            squares, pieces = _conv(m, a, g, squares, pieces)
            continue
        if isinstance(m, nn.BatchNorm2d):  # per-sample sums over the positions, then as a BatchNorm1d
            xhat = (a - m.running_mean[:, None, None]) / _std(m)[:, None, None]
            a, g = (g * xhat).sum((2, 3)), g.sum((2, 3))
            if m.weight is not None and m.weight.requires_grad:
                squares = _plus(squares, a.square().sum(1))
                pieces.append((m.weight, "rows", a))
        elif isinstance(m, nn.Linear):
            g_squares = g.square().sum(1)
            if m.weight.requires_grad:
                squares = _plus(squares, g_squares * a.square().sum(1))
                pieces.append((m.weight, "outer", (a, g)))
        else:
            a = (a - m.running_mean) / _std(m)
            if m.weight is not None and m.weight.requires_grad:
                rows = g * a
                squares = _plus(squares, rows.square().sum(1))
                pieces.append((m.weight, "rows", rows))
        if m.bias is not None and m.bias.requires_grad:
            squares = _plus(squares, g_squares if isinstance(m, nn.Linear) else g.square().sum(1))
            pieces.append((m.bias, "rows", g))

    def clipped_sums(scale: torch.Tensor, into: dict) -> None:
        # Each product into a tensor of its own, then copied: written in place (``out=``) at an offset of the flat
        # buffer that is not a multiple of 16 entries, the CPU kernels round differently (issue-p47's sums moved in
        # their last digit on a bottom whose sizes are not multiples of 16).
        for p, rule, operands in pieces:
            target = into[p]
            if rule == "rows":  # per-sample gradient rows (n, size): sum_i s_i row_i
                target.view(-1).copy_(scale @ operands)
            elif rule == "outer":  # a Linear weight's: sum_i s_i g_i a_i^T
                a, g = operands
                target.view(p.shape).copy_((g * scale[:, None]).T @ a)
            elif rule == "sample":  # materialised per-sample gradients (a Conv2d's)
                target.view(-1).copy_(torch.einsum("n,n...->...", scale, operands).reshape(-1))
            else:  # "ghost": sum_i s_i G_i U_i^T of a Conv2d
                grads, patches = operands
                summed = torch.bmm(grads * scale[:, None, None], patches.transpose(1, 2)).sum(0)
                target.view(-1).copy_(summed.reshape(-1))

    return squares, clipped_sums


def _std(m: nn.Module) -> torch.Tensor:
    """sqrt(running_var + eps) of a frozen BatchNorm, computed at each update (no cache: BatchNorm's own train-mode
    forward, ``.data`` writes and numpy views change the statistics without a version a cache could key on)."""
    return torch.sqrt(m.running_var + m.eps)


def _plus(total: torch.Tensor | None, term: torch.Tensor) -> torch.Tensor:
    """``total + term``, or ``term`` for the first term (0 + x is x: the same values as a sum started from zeros)."""
    return term if total is None else total + term


def _conv(m: nn.Conv2d, a: torch.Tensor, g: torch.Tensor, squares: torch.Tensor | None, pieces: list):
    """A Conv2d's per-sample squared norms and clipped-sum pieces from its unfolded input (see the module's text)."""
    n = a.shape[0]
    grads = g.reshape(n, g.shape[1], -1)  # (n, Cout, L)
    if m.weight.requires_grad:
        patches = nn.functional.unfold(a, m.kernel_size, dilation=m.dilation, padding=m.padding, stride=m.stride)
        positions, cout, width = grads.shape[2], grads.shape[1], patches.shape[1]
        if positions * (cout + width) < cout * width:  # Li et al.'s ghost norm: the L x L Gram matrices
            gram = torch.bmm(grads.transpose(1, 2), grads) * torch.bmm(patches.transpose(1, 2), patches)
            squares = _plus(squares, gram.sum((1, 2)))
            pieces.append((m.weight, "ghost", (grads, patches)))
        else:  # the per-sample gradients themselves, (n, Cout, Cin k k)
            per_sample = torch.bmm(grads, patches.transpose(1, 2))
            squares = _plus(squares, per_sample.flatten(1).square().sum(1))
            pieces.append((m.weight, "sample", per_sample))
    if m.bias is not None and m.bias.requires_grad:
        rows = grads.sum(2)
        squares = _plus(squares, rows.square().sum(1))
        pieces.append((m.bias, "rows", rows))
    return squares, pieces


def flat_noise(params: list[torch.Tensor], generator: torch.Generator) -> torch.Tensor:
    """DP-SGD's N(0, 1) for every entry of ``params``, in their order, in one flat buffer, drawn per parameter into its
    view: the values of one draw per parameter whatever the sizes (one flat draw differs where a size is not a multiple
    of 16: torch's CPU sampler fills 16 entries at a time from the stream)."""
    sizes = [p.numel() for p in params]
    flat = torch.empty(sum(sizes), dtype=params[0].dtype, device=generator.device)
    for view in flat.split(sizes):
        torch.randn(view.shape, generator=generator, out=view, device=generator.device)
    return flat.to(params[0].device)
