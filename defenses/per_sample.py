"""DP-SGD's per-sample gradient norms and clipped sums for a bottom of Linear, Conv2d and BatchNorm1d/2d layers (the
BatchNorms on their running statistics) from one ordinary backward (ghost clipping, Goodfellow 2015; Li et al. 2022;
Opacus' unfold rule for convolutions): with a_i a layer's input row and g_i the gradient of its output row for sample i,
sample i's Linear weight gradient is g_i a_i^T, of squared norm |g_i|^2 |a_i|^2, and sum_i s_i g_i a_i^T = (s * G)^T A;
a frozen BatchNorm's are g_i * xhat_i and g_i (summed over the positions of a BatchNorm2d). A Conv2d's is G_i U_i^T,
with U_i = unfold(a_i) (its kernel's patches, Cin k k x L positions) and G_i its output gradient (Cout x L): its squared
norm is sum_{p,q} (G_i^T G_i)_{pq} (U_i^T U_i)_{pq} (Li et al.'s ghost norm, O(L^2 (Cout + Cin k k))) or, where that
costs more than the gradient itself (L Cout Cin k k: early layers with many positions), |G_i U_i^T|^2 from the
materialised per-sample gradient (Opacus). Exact where rows are computed independently (what embedding-dp's argument
needs anyway). A :class:`GhostTape` records the layers' inputs during the forward that computed the rows, so the norms
cost one backward and no second forward (embedding-dp's other bottoms take ``torch.func``'s vectorised per-sample
gradients); that backward forms no weight gradient (Bu et al. 2023's book-keeping: each layer's input A and output
gradient G are kept, and the clipped sum is formed once from them, A^T diag(s) G for a Linear)."""

from __future__ import annotations

import torch
from torch import nn

#: The layers whose per-sample gradients follow from their input and output gradient rows, and the batch's dimensions
#: each rule reads (rows of a Linear / BatchNorm1d, images of a Conv2d / BatchNorm2d).
_DIMS = {nn.Linear: 2, nn.BatchNorm1d: 2, nn.Conv2d: 4, nn.BatchNorm2d: 4}
LAYERS = tuple(_DIMS)
#: The parameters a rule knows: a layer with any other trainable parameter is not covered.
_RULED = frozenset({"weight", "bias"})


def _rule(m: nn.Module) -> type | None:
    """The layer kind whose rule applies to ``m``: its class or a subclass that keeps its forward (a subclass computing
    something else from the same weight would get another layer's gradient); None otherwise."""
    for kind in LAYERS:
        if isinstance(m, kind) and type(m).forward is kind.forward:
            return kind
    return None


def _covered(m: nn.Module) -> bool:
    """A Linear; a Conv2d of one group, zero padding; a BatchNorm1d/2d on its running statistics; none with a
    trainable parameter other than its ``weight`` and ``bias``."""
    kind = _rule(m)
    if kind is None or not {k for k, p in m.named_parameters(recurse=False) if p.requires_grad} <= _RULED:
        return False
    if kind is nn.Conv2d:
        return m.groups == 1 and m.padding_mode == "zeros" and not isinstance(m.padding, str)
    return kind is nn.Linear or (not m.training and m.running_mean is not None)


def ghost_applies(module: nn.Module) -> bool:
    """Whether the rules cover exactly ``module``'s trainable parameters: each in a layer :func:`_covered` accepts, each
    in one layer only (a weight tied across two layers gets one gradient of their sum, and its per-sample norm is that
    sum's: the rules would write two and add their squares), and no layer reached twice (each rule reads one call)."""
    seen: set[int] = set()
    for m in module.modules(remove_duplicate=False):
        own = [p for p in m.parameters(recurse=False) if p.requires_grad]
        if not own:
            continue
        if not _covered(m) or any(id(p) in seen for p in own):
            return False
        seen.update(id(p) for p in own)
    return True


class GhostTape:
    """While entered, records each forward of ``module``'s trainable Linear / BatchNorm1d layers: the input rows, and
    (by a hook on the output, registered at the forward, before an in-place activation can change that tensor) the
    output's gradient rows once a backward reaches them."""

    def __init__(self, module: nn.Module):
        self.layers = [m for m in module.modules()
                       if _rule(m) is not None and any(p.requires_grad for p in m.parameters(recurse=False))]
        self.params = [p for m in self.layers for p in m.parameters(recurse=False) if p.requires_grad]
        #: Per layer the one parameter whose gradient the backward asks for (the bias where it trains: a row sum).
        self.reached = [next(p for p in (m.bias, m.weight) if p is not None and p.requires_grad) for m in self.layers]
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
        function ``clipped_sums(scale, into)`` writing each trainable parameter's sum_i s_i grad_i (per-sample scales
        s, (n,)) into ``into[parameter]`` (a tensor of its size); None where a layer was called other than once or on an
        input of another rank than the rule's (2-D rows, 4-D images). The one backward asks autograd for one cheap
        parameter gradient per layer (its bias where it trains): it must reach every layer's output, whose gradient
        rows the hooks record, and no layer's weight gradient is formed there (Bu et al. 2023's book-keeping: the
        clipped sums are formed once, from the recorded rows)."""
        seen = self.seen
        if len(seen) != len(self.layers) or any(e[1].dim() != _DIMS[_rule(e[0])] for e in seen) \
                or not out.requires_grad:
            return None
        torch.autograd.grad(out, self.reached, allow_unused=True)  # fires the output hooks: each layer's gradient rows
        squares = None
        pieces = []  # (parameter, rule, its operands): how its clipped sum is formed
        for m, a, g in seen:
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
        if squares is None:
            squares = seen[0][1].new_zeros(seen[0][1].shape[0])

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


def ghost_grads(module: nn.Module, objective, x: torch.Tensor):
    """:meth:`GhostTape.norms` of ``objective(module(x))``, from a forward of its own."""
    with GhostTape(module) as tape:
        out = objective(module(x))
    return tape.norms(out)
