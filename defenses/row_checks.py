"""embedding-dp's checks that a bottom's rows are each a function of their own sample (issue 47): its argument (each
sent row a function of its own sample, sensitivity 2C per row; DP-SGD's per-sample gradients) holds for no other
bottom, on the tape's path or torch.func's. A hook or plugin forward that mixes the batch's rows (centring over the
batch, a softmax over dim 0) is seen by what it does, not by what it is: the bottom is run on the batch and on two
probes that keep some of its rows in place and replace the others (:func:`forward_mixing`); on the tape, the rows'
gradients are compared with those of a weighted objective (:func:`gradient_mixing`: a tensor hook mixing them)."""

from __future__ import annotations

import contextlib

import torch
from torch import nn

#: Modules drawing a random mask in training mode: put in eval for the check only (their per-row masks would differ
#: between the batch and a probe); any other draw in a forward reads as mixing.
_DROPOUTS = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout)
#: Per row: |batch row - probe row| <= this times the row's largest entry (plus a floor of the same times 1e-6 of the
#: batch's largest, for rows near 0), in float64 (where the bottom runs in it; 64 ulps of its own dtype otherwise).
RTOL64 = 1e-10


def forward_mixing(bottom: nn.Module, x: torch.Tensor) -> str:
    """Why ``bottom``'s output rows on ``x`` are not each a function of their own row of ``x``, or ''.

    The bottom runs (its parameters detached, its Dropout-type modules in eval, the global random state restored after)
    on x and on two probes of the same n rows: a random half A of x's rows kept in place and the others replaced by
    rows of A, and the same for the other half B (a stream of its own, seeded by n: no training draw moves). Each kept
    row's output must equal its output in x, per row, in float64 (parameters and buffers cast by ``functional_call``,
    the module's own untouched; the bottom's own dtype, with 64 of its ulps, where it cannot run in float64). A
    forward that depends on the batch only through its size (the probes keep n) passes; one that draws random numbers
    outside a Dropout module reads as mixing, and the reason says so. Non-finite entries are not judged here (the
    training's own check fails a run whose rows are not finite). A mixing confined to rows of the same half, or that
    the probes' repeated rows leave unchanged, is not seen."""
    n = x.shape[0]
    if n < 2:
        return ""
    order = torch.randperm(n, generator=torch.Generator().manual_seed(n)).to(x.device)
    halves = (order[: n // 2], order[n // 2:])
    probes = []
    for kept, other in (halves, halves[::-1]):
        probe = x.clone()
        probe[other] = x[kept.repeat(-(-other.numel() // kept.numel()))[: other.numel()]]
        probes.append((kept, probe))
    outputs, tolerance = _outputs(bottom, [x] + [p for _, p in probes])
    name = type(bottom).__qualname__
    whole = outputs[0]
    if not isinstance(whole, torch.Tensor) or whole.dim() == 0 or whole.shape[0] != n:
        return f"the bottom {name} returns {getattr(whole, 'shape', type(whole).__name__)} for a batch of {n} rows"
    whole = whole.reshape(n, -1).double()
    floor = tolerance * 1e-6 * float(whole.abs().nan_to_num(nan=0.0, posinf=0.0).max())
    for (kept, _), out in zip(probes, outputs[1:]):
        ref, got = whole[kept], out.reshape(n, -1)[kept].double()
        bound = tolerance * ref.abs().amax(1) + floor
        off = (got - ref).abs().amax(1) > bound  # NaN compares False
        if bool(off.any()):
            row = int(kept[off.nonzero()[0, 0]])
            return (f"the bottom {name}'s output row {row} changed when other rows of its batch were replaced (a hook "
                    "or forward mixing the batch's rows, e.g. centring over the batch, or a random draw outside a "
                    "Dropout module, which reads the same)")
    return ""


def gradient_weights(n: int, like: torch.Tensor) -> torch.Tensor:
    """Per-sample weights in [0.5, 1.5) for :func:`gradient_mixing`, from a stream of their own (no training draw
    moves)."""
    generator = torch.Generator().manual_seed(n)
    return torch.rand(n, generator=generator, device=generator.device, dtype=like.dtype).add_(0.5).to(like.device)


def gradient_mixing(layers: list[str], grads: list, weighted: list, weights: torch.Tensor) -> str:
    """Why the rows' gradients at the named layers' outputs are not each sample's own (a hook mixing rows, in the
    forward or the backward: each sample's part of the update would depend on the others), or '': with rows
    independent, the gradient of sum_i w_i rows_i at a layer's output row i is w_i times that of sum_i rows_i (``grads``
    and ``weighted``), to float rounding: compared per row in float64, within 64 ulps of the gradients' dtype of the
    row's largest entry (plus 1e-6 of that of the layer's largest, for rows near 0; a mixing hook moves a row by its
    own size times its weight)."""
    for layer, g, got in zip(layers, grads, weighted):
        if got is None:
            return f"the weighted rows do not reach {layer}"
        expected = (g.double() * weights.double().view(-1, *[1] * (g.dim() - 1))).flatten(1)
        ulps = 64 * torch.finfo(g.dtype).eps
        bound = ulps * expected.abs().amax(1) + ulps * 1e-6 * expected.abs().max()
        if bool(((got.double().flatten(1) - expected).abs().amax(1) > bound).any()):
            return (f"the gradient at {layer} mixes the batch's rows (a hook's?): a sample's part of the update would "
                    "depend on the others")
    return ""


def _outputs(bottom: nn.Module, batches: list[torch.Tensor]) -> tuple[list, float]:
    """``bottom``'s outputs on ``batches`` and the relative tolerance to compare them with: in float64 without
    gradients; where that raises, with a batch requiring a gradient (a hook registering a tensor hook on an output
    needs one; none is computed); where that raises too, in the bottom's own dtype (a tensor it holds outside its
    state), 64 of its ulps."""
    for dtype, grad in ((torch.float64, False), (torch.float64, True)):
        try:
            return _run(bottom, batches, dtype=dtype, grad=grad), RTOL64
        except RuntimeError:
            pass
    outputs = _run(bottom, batches, dtype=None, grad=True)
    return outputs, 64 * torch.finfo(outputs[0].dtype).eps


def _run(bottom: nn.Module, batches: list[torch.Tensor], *, dtype: torch.dtype | None, grad: bool) -> list:
    """``bottom`` on a copy of each batch, in ``dtype`` where given (its floating parameters, buffers and the batch
    cast), its Dropout-type modules in eval, the global random state as before."""
    dropouts = [m for m in bottom.modules() if isinstance(m, _DROPOUTS) and m.training]
    devices = [b.device.index or 0 for b in batches if b.is_cuda][:1]
    with torch.random.fork_rng(devices=devices), kept_parameters(bottom), torch.set_grad_enabled(grad):
        try:
            for m in dropouts:
                m.training = False
            state = {f"bottom.{k}": _cast(p.detach(), dtype) for k, p in bottom.named_parameters()}
            state.update((f"bottom.{k}", _cast(b, dtype).clone()) for k, b in bottom.named_buffers())  # none updated
            # Each batch plus a zero (a leaf requiring a gradient with ``grad``): a fresh tensor, so that an in-place
            # module writes no caller's.
            zero = torch.zeros((), dtype=dtype or batches[0].dtype, device=batches[0].device, requires_grad=grad)
            return torch.func.functional_call(_Each(bottom), state, ([b.to(zero.dtype) + zero for b in batches],))
        finally:
            for m in dropouts:
                m.training = True


class _Each(nn.Module):
    """The bottom on each of a list of batches, under one ``functional_call`` (its state swapped in once)."""

    def __init__(self, bottom: nn.Module):
        super().__init__()
        self.bottom = bottom

    def forward(self, batches: list[torch.Tensor]) -> list:
        return [(out.detach() if isinstance(out, torch.Tensor) else out) for out in map(self.bottom, batches)]


def _cast(t: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    return t.to(dtype) if dtype is not None and t.is_floating_point() else t


@contextlib.contextmanager
def kept_parameters(module: nn.Module):
    """``module``'s own parameter objects put back on exit: ``functional_call`` leaves a module reached twice holding
    the tensors it swapped in."""
    held = [(m, list(m.named_parameters(recurse=False, remove_duplicate=False))) for m in module.modules()]
    try:
        yield
    finally:
        for m, own in held:
            for k, p in own:
                setattr(m, k, p)
