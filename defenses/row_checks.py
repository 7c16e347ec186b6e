"""embedding-dp's checks that a bottom's rows are each a function of their own sample (issue 47): its argument (each
sent row a function of its own sample, sensitivity 2C per row; DP-SGD's per-sample gradients) holds for no other
bottom, on the tape's path or torch.func's. A hook or plugin forward that mixes the batch's rows (centring over the
batch, a softmax over dim 0) is seen by what it does, not by what it is: the bottom is run on the batch and on probes
that keep some of its rows in place and replace the others (:func:`probes`: every pair of rows kept apart in one), in
float64 and as the training runs it (:func:`forward_mixing`: the rows, and the buffers' new values); on the tape, the
rows' gradients are compared with those of two objectives weighting either half of the batch 0
(:func:`gradient_mixing`) and each kept row's output and records with the batch's, as trained
(``tape_checks.record_mixing``)."""

from __future__ import annotations

import contextlib
import itertools
import math

import torch
from torch import nn

from vflpriv.common.errors import ProtocolError

#: Modules drawing per row whose draws a kept row does not get alike from one seed (RReLU's CPU kernel draws for the
#: negative entries only, so a row's draws depend on the other rows' signs): in eval for the check only.
_ROW_DRAWS = (nn.RReLU,)
#: The random stream each of the check's forwards starts from (kept rows draw the same numbers in each).
_SEED = 0x5EED
#: Per row: |batch row - probe row| <= this times the row's largest entry (plus a floor of the same times 1e-6 of the
#: batch's largest, for rows near 0), in float64 (where the bottom runs in it; :data:`OWN_ULPS` of its own dtype
#: otherwise).
RTOL64 = 1e-10
#: Per row, as the training runs the bottom (its own dtype, gradients on): |batch row - probe row| <= this many ulps of
#: that dtype times the row's largest entry (plus the same floor). The same rows at the same shapes run the same
#: kernels, so a kept row's entries agree to their accumulation order (bit for bit on CPU); 8 ulps is about 1e-6 in
#: float32, 0.8% in float16, 6% in bfloat16 (the float64 forwards see a smaller mixing where it is not gated on them).
OWN_ULPS = 8


def _ranks(n: int, *, seed: int) -> torch.Tensor:
    """Each row's rank, 0 to n - 1, by a permutation drawn from ``seed`` (the run's: a stream of its own, no training
    draw moves)."""
    generator = torch.Generator().manual_seed(seed)
    rank = torch.empty(n, dtype=torch.long)
    rank[torch.randperm(n, generator=generator, device=generator.device)] = torch.arange(n)
    return rank


def probe_count(n: int) -> int:
    """m, the fewest probes that keep every ordered pair of n rows apart: the least m with C(m, floor(m/2)) >= n
    (Sperner: n codes none of which contains another need that many positions); 8 at n = 64, 10 at n = 128."""
    m = 2
    while math.comb(m, m // 2) < n:
        m += 1
    return m


def probes(n: int, *, seed: int, device: torch.device) -> list[torch.Tensor]:
    """The rows each probe keeps (sorted): the row of rank r (:func:`_ranks`) gets the r-th code of weight floor(m/2)
    among m positions (m = :func:`probe_count`, ``itertools.combinations`` order), and probe p keeps the rows whose
    code holds p. Distinct codes of one weight never contain one another, so for every ordered pair of rows (i, j)
    some probe keeps i and replaces j: a mixing confined to any pair is seen (the rank's bits and their complements,
    2 ceil(log2 n) probes, were such codes too). A position no row's code holds, or every row's, separates no pair."""
    m, rank = probe_count(n), _ranks(n, seed=seed)
    positions = torch.tensor(list(itertools.islice(itertools.combinations(range(m), m // 2), n)))
    held = torch.zeros(n, m, dtype=torch.bool).scatter_(1, positions, True)[rank]  # (row, position): the row's code
    return [column.nonzero().flatten().to(device) for column in held.t() if 0 < int(column.sum()) < n]


def halves(n: int, device: torch.device, *, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A split of the n rows into two halves by the lowest bit of their rank (:func:`_ranks`), for the gradient
    check's weights."""
    low = _ranks(n, seed=seed) & 1
    return (low == 0).nonzero().flatten().to(device), (low == 1).nonzero().flatten().to(device)


def probe_batches(x: torch.Tensor, kept: list[torch.Tensor], *, chosen_by: torch.Tensor | None = None
                  ) -> list[torch.Tensor]:
    """Per probe, a copy of ``x`` whose rows not in its kept set are replaced by kept rows: each by the next kept row
    (cycled), or, where that row of ``chosen_by`` (default ``x``) equals its own, by a kept row of another value where
    one exists (a replacement by an equal row changes nothing, so a duplicate row would hide the pair from the probe).
    Linear in n: the other value is the first kept row's, or the first kept row differing from it."""
    n, out = x.shape[0], []
    basis = x if chosen_by is None else chosen_by
    group = torch.unique(basis.reshape(n, -1), dim=0, return_inverse=True)[1]  # equal rows, one group
    for rows in kept:
        other = torch.ones(n, dtype=torch.bool, device=rows.device)
        other[rows] = False
        other = other.nonzero().flatten()
        cycled = rows[torch.arange(other.numel(), device=rows.device) % rows.numel()]
        kept_group = group[rows]
        second = rows[(kept_group != kept_group[0]).to(torch.int8).argmax()]  # rows[0] itself where all are equal
        own = group[other]
        alternative = torch.where(group[rows[0]] != own, rows[0], second)
        source = torch.where((group[cycled] == own) & (group[alternative] != own), alternative, cycled)
        probe = x.clone()
        probe[other] = x[source]
        out.append(probe)
    return out


def forward_mixing(bottom: nn.Module, x: torch.Tensor, *, seed: int = 0, as_trained: bool = True) -> str:
    """Why ``bottom``'s output rows on ``x`` are not each a function of their own row of ``x``, or ''.

    The bottom runs (its parameters detached and copied, the global random state restored after) on x and on the
    :func:`probes` of the same n rows (``seed`` the run's; m of them, 8 at n = 64, each keeping some rows in place and
    replacing the others by copies of kept rows). Each kept row's output must equal its output in x, per row, in two
    settings: (1) in float64 (parameters and buffers cast by ``functional_call``, the module's own untouched; the
    bottom's own dtype where it cannot run in float64; an integer batch as it is), within :data:`RTOL64`: a small
    mixing is seen; (2) as the training runs it: in the bottom's own dtype, gradients enabled, parameters requiring a
    gradient as they do and the batch as given, within :data:`OWN_ULPS` of that dtype: a forward mixing only with
    gradients on, only in its own dtype or only for a batch that requires no gradient is seen (skipped where (1) already
    ran so, or without ``as_trained``: the caller checks the outputs as trained, ``tape_checks.record_mixing``). Each
    forward starts from fresh clones of the buffers and the same random stream: a forward that depends on
    the batch only through its size (the probes keep n) or draws its random numbers per row (Dropout; RReLU runs in
    eval) passes; a draw that moves rows (a shuffle) is mixing. The buffers' new values after each forward (a forward
    hook on the bottom sees rebound ones) must equal the batch's: spectral_norm's power iteration (a function of the
    weight) passes, a running statistic of the features (later rows would depend on earlier samples) fails (one written
    in the backward: ``tape_checks.record_mixing``, on the tape's path only). Non-finite
    entries are not judged here (the training's own check fails a run whose rows are not finite). A mixing that the
    probes' repeated rows leave unchanged is not seen. The batch runs again after the probes: a forward that is not a
    function of its input and state (a schedule in a Python attribute) is refused as such, not as mixing; its Python
    state has moved by the checks' forwards then. Cost: 2 (2 + m) forwards, once per training."""
    n = x.shape[0]
    if n < 2:
        return ""
    kept = probes(n, seed=seed, device=x.device)
    batches = [x, *probe_batches(x, kept), x]  # the batch again last: a forward that is not a function of its input
    (outputs, tolerance), ran_as_trained = _outputs(bottom, batches)
    why = _compare(bottom, n, kept, outputs, tolerance)
    if not why and not ran_as_trained and as_trained:
        outputs = _run(bottom, batches, dtype=None, grad=True, leaf=False)
        why = _compare(bottom, n, kept, outputs, OWN_ULPS * torch.finfo(outputs[0][0].dtype).eps)
    return why


def _compare(bottom: nn.Module, n: int, kept: list, outputs: list, tolerance: float) -> str:
    """Why a kept row's output in a probe differs from its output in the batch by more than ``tolerance`` times the
    row's largest entry (plus 1e-6 of that times the batch's largest, for rows near 0), or a buffer's new value from
    the batch's, or ''."""
    name = type(bottom).__qualname__
    (whole, buffers), (again, _), outputs = outputs[0], outputs[-1], outputs[:-1]
    if not isinstance(whole, torch.Tensor) or whole.dim() == 0 or whole.shape[0] != n:
        return f"the bottom {name} returns {getattr(whole, 'shape', type(whole).__name__)} for a batch of {n} rows"
    if any(not isinstance(out, torch.Tensor) or out.shape != whole.shape for out, _ in outputs[1:]):
        return f"the bottom {name} returns another shape when other rows of its batch are replaced"
    if not isinstance(again, torch.Tensor) or again.shape != whole.shape or first_off(
            whole, [again], torch.ones(1, n, dtype=torch.bool, device=whole.device), tolerance) is not None:
        return (f"the bottom {name}'s forward is not a function of its input and state: the same batch gave other "
                "rows in a later forward (a counter or schedule kept in a Python attribute?); the checks cannot "
                "judge it")
    row = first_off(whole, [out for out, _ in outputs[1:]], kept_mask(kept, n), tolerance)
    if row is not None:
        return (f"the bottom {name}'s output row {row} changed when other rows of its batch were replaced (a hook "
                "or forward mixing the batch's rows, e.g. centring over the batch)")
    agree = {k: alike(value, [moved.get(k) for _, moved in outputs[1:]], tolerance) for k, value in buffers.items()}
    for j in range(len(outputs) - 1):
        for k in buffers:
            if not agree[k][j]:
                return (f"the bottom {name}'s buffer {k!r} took a new value that depends on the batch's rows (a "
                        "running statistic of the features: later rows would depend on earlier samples)")
    return ""


def kept_mask(kept: list[torch.Tensor], n: int) -> torch.Tensor:
    """(probes, n): whether each probe keeps each row."""
    mask = torch.zeros(len(kept), n, dtype=torch.bool, device=kept[0].device)
    for j, rows in enumerate(kept):
        mask[j, rows] = True
    return mask


def first_off(ref: torch.Tensor, probed: list[torch.Tensor], mask: torch.Tensor, tolerance: float) -> int | None:
    """The first row kept by a probe (``mask``) whose entries there differ from ``ref``'s by more than ``tolerance``
    times the row's largest entry (plus 1e-6 of that times ``ref``'s largest, for rows near 0), all probes at once, in
    the rows' own floating dtype (a difference of two entries within a factor 2 is exact there; ``tolerance`` is 8 ulps
    or more of it) or float64; or None. NaN compares False (the training's own check fails non-finite rows)."""
    n = ref.shape[0]
    ref = ref.reshape(n, -1)
    ref = ref if ref.is_floating_point() and ref.dtype in (torch.float32, torch.float64) else ref.double()
    if not ref.shape[1]:
        return None
    size = ref.abs()
    floor = tolerance * 1e-6 * float(size.nan_to_num(nan=0.0, posinf=0.0).max())
    got = torch.stack([p.reshape(n, -1).to(ref.dtype) for p in probed])
    off = ((got - ref).abs_().amax(2) > size.amax(1).mul_(tolerance).add_(floor)) & mask
    hit = off.nonzero()
    return int(hit[0, 1]) if hit.numel() else None


def alike(a: torch.Tensor, others: list[torch.Tensor | None], tolerance: float) -> list[bool]:
    """Per value of ``others``, whether it agrees with a buffer's value ``a`` (shapes, dtypes and, within ``tolerance``
    of ``a``'s largest entry, values; NaN where ``a`` has NaN), the floating ones compared in one stacked pass."""
    same = [b is not None and a.shape == b.shape and a.dtype == b.dtype for b in others]
    if not a.is_floating_point():
        return [ok and torch.equal(a, b) for ok, b in zip(same, others)]
    if not any(same):
        return same
    a = a.double()
    scale = float(a.abs().nan_to_num(nan=0.0, posinf=0.0).max()) if a.numel() else 0.0
    b = torch.stack([b.double() for ok, b in zip(same, others) if ok])
    close = ((a - b).abs() <= tolerance * scale) | (a.isnan() & b.isnan()) | (a == b)
    held = iter((close.flatten(1) if close.dim() > 1 else close[:, None]).all(1).tolist())
    return [ok and next(held) for ok in same]


def gradient_weights(n: int, like: torch.Tensor, *, seed: int = 0) -> list[torch.Tensor]:
    """The per-sample weights of :func:`gradient_mixing`'s two weighted objectives: w on the forward check's half A
    and 0 on B, then 0 on A and w on B (w in [0.5, 1.5), from a stream of its own: no training draw moves). A weight
    0 moves a row's direction (to none), so a hook rescaling rows by a statistic of the batch's directions, which any
    positive weights leave as it was, is seen; the random w on each half sees a linear mixing within it."""
    generator = torch.Generator().manual_seed(n)
    w = torch.rand(n, generator=generator, device=generator.device, dtype=like.dtype).add_(0.5).to(like.device)
    weights = []
    for kept in halves(n, like.device, seed=seed):
        on = torch.zeros_like(w)
        on[kept] = w[kept]
        weights.append(on)
    return weights


def gradient_mixing(layers: list[str], grads: list, weighted: list, weights: list) -> str:
    """Why the rows' gradients at the named layers' outputs are not each sample's own (a hook mixing rows, in the
    forward or the backward: each sample's part of the update would depend on the others), or '': with rows
    independent, the gradient of sum_i w_i rows_i at a layer's output row i is w_i times that of sum_i rows_i
    (``grads``; ``weighted[k]`` per layer for ``weights[k]``), to float rounding, exactly 0 where w_i is 0: compared
    per row in float64, within 64 ulps of the gradients' dtype of the row's largest entry (plus 1e-6 of that of the
    layer's largest, for rows near 0; a mixing hook moves a row by its own size times its weight). A row-wise hook
    that is not a scaling (a clamp, a per-row normalisation) is read as mixing too: a refusal, never a false claim."""
    for w, got_layers in zip(weights, weighted):
        for layer, g, got in zip(layers, grads, got_layers):
            if got is None:
                return f"the weighted rows do not reach {layer}"
            expected = (g.double() * w.double().view(-1, *[1] * (g.dim() - 1))).flatten(1)
            ulps = 64 * torch.finfo(g.dtype).eps
            bound = ulps * expected.abs().amax(1) + ulps * 1e-6 * expected.abs().max()
            if bool(((got.double().flatten(1) - expected).abs().amax(1) > bound).any()):
                return (f"the gradient at {layer} mixes the batch's rows (a hook's?): a sample's part of the update "
                        "would depend on the others")
    return ""


def _outputs(bottom: nn.Module, batches: list[torch.Tensor]) -> tuple[tuple[list, float], bool]:
    """``bottom``'s outputs on ``batches`` with the relative tolerance to compare them with, and whether they were
    computed as the training computes them: in float64 without gradients; where that raises, with a batch requiring a
    gradient (a hook registering a tensor hook on an output needs one; none is computed); where that raises too, as
    the training runs it (a tensor it holds outside its state), :data:`OWN_ULPS` of its dtype; where that raises, a
    :class:`ProtocolError` naming the bottom."""
    for dtype, grad in ((torch.float64, False), (torch.float64, True)):
        try:
            return (_run(bottom, batches, dtype=dtype, grad=grad, leaf=True), RTOL64), False
        except Exception:  # noqa: BLE001  (a plugin's forward may raise anything; the last try reports it)
            pass
    try:
        outputs = _run(bottom, batches, dtype=None, grad=True, leaf=False)
    except Exception as error:  # noqa: BLE001
        raise ProtocolError(f"embedding-dp: the rows check could not run the bottom {type(bottom).__qualname__} on its "
                            f"batch ({type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''})"
                            ) from error
    return (outputs, OWN_ULPS * torch.finfo(outputs[0][0].dtype).eps), True


def _run(bottom: nn.Module, batches: list[torch.Tensor], *, dtype: torch.dtype | None, grad: bool, leaf: bool) -> list:
    """(output, buffers' new values) of ``bottom`` on a copy of each batch, in ``dtype`` where given (its floating
    parameters, buffers and a floating batch cast), each forward from fresh clones of its parameters and buffers (an
    in-place write in a forward touches no real one) and the random stream seeded alike, the global random state as
    before; with ``grad``, from a batch requiring a gradient (``leaf``) or from parameters requiring one as the
    bottom's do (none is computed)."""
    devices, outputs = sorted({b.device.index or 0 for b in batches if b.is_cuda}), []
    with check_forwards(bottom, devices), torch.set_grad_enabled(grad), new_buffers(bottom) as moved:
        for batch in batches:
            state = {**{k: as_parameter(_copy(p.detach(), dtype), grad and not leaf and p.requires_grad)
                        for k, p in bottom.named_parameters()},
                     **{k: _copy(b, dtype) for k, b in bottom.named_buffers()}}
            reseed(devices)
            moved.clear()
            out = torch.func.functional_call(bottom, state, (_fresh(batch, dtype, grad and leaf),))
            outputs.append((out.detach() if isinstance(out, torch.Tensor) else out, dict(moved)))
    return outputs


@contextlib.contextmanager
def check_forwards(bottom: nn.Module, devices: list[int]):
    """Inside, the check's forwards of ``bottom``: the global random state (CPU and ``devices``) and the bottom's own
    parameter and buffer objects as before on exit, its per-row drawing modules (:data:`_ROW_DRAWS`) in eval."""
    drawing = [m for m in bottom.modules() if isinstance(m, _ROW_DRAWS) and m.training]
    with torch.random.fork_rng(devices=devices), kept_state(bottom), _eval(drawing):
        yield


def reseed(devices: list[int]) -> None:
    """The random stream each check forward starts from (:data:`_SEED`): kept rows draw the same numbers in each."""
    torch.default_generator.manual_seed(_SEED)
    for d in devices:
        torch.cuda.default_generators[d].manual_seed(_SEED)


@contextlib.contextmanager
def new_buffers(bottom: nn.Module):
    """Inside, a dict that each forward of ``bottom`` fills with its buffers' values at the forward's end (a forward
    hook: the values swapped in, updated in place or rebound), cloned; no hook after."""
    moved: dict = {}
    handle = bottom.register_forward_hook(
        lambda m, i, o: moved.update({k: b.detach().clone() for k, b in m.named_buffers()}))
    try:
        yield moved
    finally:
        handle.remove()


@contextlib.contextmanager
def _eval(modules: list[nn.Module]):
    """``modules`` in eval inside, back in training mode on exit."""
    try:
        for m in modules:
            m.training = False
        yield
    finally:
        for m in modules:
            m.training = True


def _fresh(batch: torch.Tensor, dtype: torch.dtype | None, grad: bool) -> torch.Tensor:
    """A new tensor of ``batch`` (an in-place module writes no caller's), floating ones cast to ``dtype`` and, with
    ``grad``, from a leaf requiring a gradient (none is computed)."""
    if not batch.is_floating_point():
        return batch.clone()
    zero = torch.zeros((), dtype=dtype or batch.dtype, device=batch.device, requires_grad=grad)
    return batch.to(zero.dtype) + zero


def as_parameter(t: torch.Tensor, requires_grad: bool) -> nn.Parameter:
    """``t`` as an ``nn.Parameter``, as the training's forward sees its weights (a hook testing ``type(m.weight)``
    behaves in the probes as it does there)."""
    return nn.Parameter(t, requires_grad=requires_grad)


def _copy(t: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    """A new tensor of ``t``'s values, cast to ``dtype`` where given and ``t`` is floating (one copy, not a cast and a
    clone)."""
    return t.to(dtype, copy=True) if dtype is not None and t.is_floating_point() else t.clone()


@contextlib.contextmanager
def kept_state(module: nn.Module):
    """``module``'s own parameter and buffer objects put back on exit: ``functional_call`` leaves a module reached
    twice holding the tensors it swapped in."""
    held = [(m, [*m.named_parameters(recurse=False, remove_duplicate=False),
                 *m.named_buffers(recurse=False, remove_duplicate=False)]) for m in module.modules()]
    try:
        yield
    finally:
        for m, own in held:
            for k, t in own:
                setattr(m, k, t)


def computes_in_place(bottom: nn.Module) -> bool:
    """Whether a module of ``bottom`` computes in place (``inplace=True``): it may write the batch it was given."""
    return any(getattr(m, "inplace", False) is True for m in bottom.modules())
