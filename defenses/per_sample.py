"""DP-SGD's per-sample gradient norms and clipped sums for a bottom of Linear, Conv2d and BatchNorm1d/2d layers (the
BatchNorms on their running statistics) from one ordinary backward (ghost clipping; the rules: ``ghost_sums.py``). A
:class:`GhostTape` records the layers' inputs during the forward that computed the rows, so the norms cost one backward
and no second forward; that backward forms no weight gradient (Bu et al. 2023's book-keeping).

When the tape applies (:func:`ghost_applies`): the rules are exact only where each covered layer is called once, on
the batch's own rows, and its parameters enter the objective through that call alone. Neither is visible from outside
a module whose forward is unknown (a plugin's ``F.linear(h, enc.weight.t())`` reuses a weight outside its layer; a
``fc(x.reshape(n * k, d))`` makes k rows of each sample), so the tape runs only on a bottom built wholly of modules of
known forward, by exact type (a subclass may change its forward or ``_conv_forward``): the covered layers,
parameter-free modules that map row i to row i (activations, pooling, ``Flatten``/``Unflatten`` from dim 1),
``nn.Sequential`` and vflpriv's own encoders (``models/encoders.py`` and the SSL towers; read: each child called once,
on per-sample rows); any other bottom takes ``torch.func``'s vectorised per-sample gradients.

Hooks (module or global; public APIs only: torch lists no hooks publicly). While entered, the tape stands in for each
covered layer's ``forward`` (an attribute of the instance, removed at exit): it records the rows the layer's own
computation received and the gradient that reaches the node of its output (a node pre-hook, run after every tensor hook
on that output), so a forward or pre-hook that rescales, replaces or wraps a layer's input or output row by row (or adds
a tensor hook on it) changes what is recorded exactly as it changes the layer's true gradient, and the rules stay exact
(the naive per-sample loop with the hooks). At run time :meth:`GhostTape.norms` checks where a hook could break a rule:
every covered layer (frozen ones too: their input's rank and rows) called on a first dimension of the batch's n, each
trainable one once; every output reached; and, on the autograd graph of the objective, each trainable parameter reached
by no more than one edge (a hook or module reusing a weight outside its layer's call adds one) and no custom autograd
Function (a full backward hook or backward pre-hook puts one there; its backward may mix the rows' gradients). Where one
fails the update goes to ``torch.func``, which recomputes it from x and the received gradient, one sample at a time (it
fails the run only where it cannot trace the bottom either: a full backward hook). An in-place module (``inplace=True``)
writing a trainable layer's recorded input after its call sends the update to ``torch.func`` too
(:meth:`GhostTape._overwritten`, by the written storage, every in-place module watched: one behind a pass-through module
or after a layer whose output a hook replaced by a recorded input). On a checked update (``check``: embedding-dp's first
after each ``train()``, once a training in its loop; two more backwards) it also checks that the rows' gradients are the
samples' own, and fails the run where they mix (a tensor hook mixing them); embedding-dp then checks the forward on both
paths (``row_checks.py``) and, on the tape, that each row's records (input and output gradient at every trainable layer:
what the update reads) are its sample's own on probes that replace the other rows (``tape_checks.py``): a pre-hook
centring a layer's input, a backward scaled by a statistic of the forward batch, or a hook writing its layer's input in
place after the call fails the run there (the checked update's forward keeps copies of the trainable layers' inputs,
:meth:`GhostTape._rewritten`: a write row by row, which mixes nothing, sends that update to ``torch.func``, which fails
the run on it). A trainable parameter reached outside the bottom's attributes (a tensor a hook captured) fails the run
on the ``torch.func`` path with its reason. Outside what the tape checks: mixing that starts after the checked update (a
hook added later, a plugin written to behave only at its first update); and a hook on the autograd node of a layer's
output (``out.grad_fn.register_hook``, the deprecated non-full ``register_backward_hook``, which rewrites its parameter
gradients: the update then stays private, each sample's clipped part computed from its own row, but is not the hooked
gradient). Parameter hooks (``p.register_hook``) never run: embedding-dp forms the bottom's gradients itself."""

from __future__ import annotations

import sys
import types
from collections import Counter

import torch
from torch import nn
from torch.autograd.function import BackwardCFunction
from torch.autograd.graph import GradientEdge, get_gradient_edge

from vflpriv.common.errors import ProtocolError, class_named, type_path
from vflpriv.defenses.gaussian_message import clip_rows
from vflpriv.defenses.ghost_sums import sums
from vflpriv.defenses.own_modules import carried
from vflpriv.defenses.row_checks import gradient_mixing, gradient_weights, kept_state
from vflpriv.models.encoders import CNNEncoder, MLPEncoder, TabularInput

#: The layers whose per-sample gradients follow from their input and output gradient rows, and the batch's dimensions
#: each rule reads (rows of a Linear / BatchNorm1d, images of a Conv2d / BatchNorm2d).
_DIMS = {nn.Linear: 2, nn.BatchNorm1d: 2, nn.Conv2d: 4, nn.BatchNorm2d: 4}
#: The parameters a rule knows: a layer with any other trainable parameter is not covered.
_RULED = frozenset({"weight", "bias"})
#: Modules without a trainable parameter whose output row i is a function of input row i alone (pointwise, pooling
#: within a sample's own channels, a frozen embedding's lookup; ``Flatten``/``Unflatten`` only from dim 1 on, see
#: :func:`_known`), and of draws of its own: Dropout's mask, RReLU's slopes, independent per entry (RReLU's CPU kernel
#: draws for the negative entries only, so which numbers a row gets depends on the others' signs, not their law: the
#: rows stay independent given their samples, and the tape's update is the gradient of the draws its forward made).
_ROWWISE = frozenset({nn.Identity, nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.ELU, nn.GELU, nn.SiLU, nn.Tanh, nn.Sigmoid,
                      nn.Softplus, nn.Dropout, nn.Flatten, nn.Unflatten, nn.MaxPool2d, nn.AvgPool2d,
                      nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d, nn.Embedding, nn.RReLU})
#: Containers whose forward calls each child at most once, in order, on the batch's rows (``nn.ModuleList`` has none:
#: its parent calls the children) and uses no parameter of theirs outside those calls: vflpriv's own encoders, read.
_COMPOSITES = frozenset({nn.Sequential, nn.ModuleList, TabularInput, MLPEncoder, CNNEncoder})
#: The SSL methods' encoders (``methods/towers.py``, read: ``LocalEncoder`` is top(bottom(x)), ``PooledEncoder`` the
#: mean or the concatenation of cross(x) and local(x)), matched by identity once their module is loaded: defenses may
#: not import methods, and no bottom of theirs exists before it is (torch.func is about 28x slower on them).
_TOWERS = ("vflpriv.methods.towers", ("LocalEncoder", "PooledEncoder"))
_BATCHNORMS = (nn.BatchNorm1d, nn.BatchNorm2d)


def _covered(m: nn.Module, own: list[tuple[str, nn.Parameter]]) -> bool:
    """A layer of the rules' table by exact type (a subclass may compute something else from the same weight): a
    Linear; a Conv2d of one group, zero padding; a BatchNorm1d/2d on its running statistics (in any case: batch
    statistics couple the rows); none with a trainable parameter other than its ``weight`` and ``bias`` (``own``: its
    ``named_parameters(recurse=False)``)."""
    kind = type(m)
    if kind in _BATCHNORMS and (m.training or m.running_mean is None):
        return False
    trained = {k for k, p in own if p.requires_grad}
    if kind not in _DIMS or not trained <= _RULED:
        return False
    if kind is nn.Conv2d and trained:
        return m.groups == 1 and m.padding_mode == "zeros" and not isinstance(m.padding, str)
    return True


def _known(m: nn.Module, own: list[tuple[str, nn.Parameter]]) -> bool:
    """Whether ``m``'s own forward is one the tape reads right: a covered layer, a row-wise module without trainable
    parameters (``own``: its ``named_parameters(recurse=False)``), or a known container; never one whose instance
    holds a callable of its own (``m.forward = ...``, a function given as ``LocalEncoder``'s bottom, a module hidden
    from ``named_modules``: the type stays, the forward does not)."""
    kind = type(m)
    if carried(m):  # a function or an unregistered module in its attributes: code the tape has not read
        return False
    if kind in _DIMS:
        return _covered(m, own)
    if any(p.requires_grad for _, p in own):
        return False
    if kind is nn.Flatten:
        return m.start_dim >= 1
    if kind is nn.Unflatten:
        return isinstance(m.dim, int) and m.dim >= 1
    return _composite(kind) or kind in _ROWWISE


def _composite(kind: type) -> bool:
    """Whether ``kind`` is a known container (:data:`_COMPOSITES`, or one of :data:`_TOWERS` where loaded)."""
    towers = sys.modules.get(_TOWERS[0])
    return kind in _COMPOSITES or (towers is not None and any(kind is getattr(towers, k, None) for k in _TOWERS[1]))


def ghost_applies(module: nn.Module) -> bool:
    """Whether the tape's rules read ``module`` right (see the module's text): every module of it :func:`_known`, and
    each trainable parameter in one layer only, reached once (a weight tied across two layers gets one gradient of
    their sum, and its per-sample norm is that sum's: the rules would write two and add their squares; a layer reached
    twice is two calls, and each rule reads one); and no container whose input an in-place module may write
    (:func:`_child_writes_shared_input`: a layer's recorded input, read again at the update, would be the written
    one). Hooks are checked on what they did, at run time (:meth:`GhostTape.norms`)."""
    seen: set[int] = set()
    if getattr(module, "inplace", False) is True:  # it would write the caller's batch
        return False
    for m in module.modules(remove_duplicate=False):
        named = list(m.named_parameters(recurse=False))  # once a module: this runs at every training forward
        if not _known(m, named) or _child_writes_shared_input(m):
            return False
        own = [p for _, p in named if p.requires_grad]
        if any(id(p) in seen for p in own):
            return False
        seen.update(id(p) for p in own)
    return True


def _child_writes_shared_input(m: nn.Module) -> bool:
    """Whether an ``inplace=True`` child of a container other than ``nn.Sequential`` may write the container's input,
    which another child may read after it (its forward may hand its input to each). An ``nn.Sequential``'s first
    child writes an input no sibling reads: where another tower recorded it (``PooledEncoder``'s cross tower beside a
    local tower starting with ``ReLU(inplace=True)``), the storage rule (:meth:`GhostTape._overwritten`, every in-place
    module watched) sees the write, as it does behind a pass-through module."""
    return type(m) is not nn.Sequential and any(getattr(c, "inplace", False) is True for c in m.children())


class GhostTape:
    """While entered, stands in for the ``forward`` of each covered layer of ``module`` (an instance attribute, removed
    at exit) and records each call: the rows its computation received and, for a trainable layer, the gradient edge of
    its output, whose gradient a node pre-hook records once a backward reaches it; and, standing in for each in-place
    module's, the storage it writes (:meth:`_overwritten`). It records nothing where
    :func:`ghost_applies` no longer holds when entered (a module added since): :meth:`norms` is then None, and the
    caller takes ``torch.func``."""

    #: It holds the bottom and its layers (``claims.altered`` accepts a module only in such a vflpriv object).
    HOLDS_MODELS = True

    def __init__(self, module: nn.Module):
        self.module = module
        self.names = {id(m): k or "(the bottom)" for k, m in module.named_modules()}
        self.watched = [m for m in module.modules() if type(m) in _DIMS]  # frozen ones too: their rows are checked
        self.layers = [m for m in self.watched if any(p.requires_grad for p in m.parameters(recurse=False))]
        self.params = [p for m in self.layers for p in m.parameters(recurse=False) if p.requires_grad]
        self.seen: list[list] | None = []
        self.edges: list[tuple] = []  # (entry, gradient edge of its output) per call of a trainable layer
        self.why = ""  # why the last norms() left the update to torch.func
        self.writes: list[tuple] = []  # (calls recorded before it, storage written, module) per in-place call
        writers = [m for m in module.modules() if getattr(m, "inplace", False) is True]  # each watched: a hook may
        # hand an in-place module a recorded input where a layer's new output was (the review's frozen gate)
        self.recorders = [(m, self._recorder(m)) for m in self.watched] + [(m, self._writer(m)) for m in writers]
        self.entered: list[nn.Module] = []
        self.keep = False  # whether the next forward keeps copies of the trainable layers' inputs (a checked update's)
        self.inputs: list[tuple] = []  # (entry, a copy of its input as the layer received it) where ``keep``

    def __enter__(self) -> GhostTape:
        """Record a new forward (what an earlier one recorded is dropped), where the tape still applies."""
        self.seen, self.edges, self.writes = ([], [], []) if ghost_applies(self.module) else (None, [], [])
        self.inputs = []
        if self.seen is not None:
            for m, record in self.recorders:
                vars(m)["forward"] = record  # found before the class's forward by the module's call
            self.entered = [m for m, _ in self.recorders]
        return self

    def __exit__(self, *exc) -> None:
        for m in self.entered:
            del vars(m)["forward"]  # the class's forward again
        self.entered = []

    def _recorder(self, m: nn.Module):
        """``m``'s own forward, recording its call: [layer, input rows, output gradient] (and, apart: the hook holds
        no reference to the node, its output's gradient edge). Bound to ``m`` as a method, so a copy made while entered
        (``copy.deepcopy``) binds it to the copy, whose calls run the copy's own forward and are not recorded."""
        forward, trains = type(m).forward, m in self.layers

        def record(layer, *args, **kwargs):
            out = forward(layer, *args, **kwargs)
            if layer is not m or self.seen is None:  # a copy of the layer: its own computation, not this tape's
                return out
            entry = [m, (args[0] if args else next(iter(kwargs.values()))).detach(), None]
            self.seen.append(entry)
            if self.keep and trains:  # compared at the checked update: a hook writing this input after the call
                self.inputs.append((entry, entry[1].clone()))
            if trains and out.requires_grad:  # the node of the layer's own output, taken before any in-place change
                self.edges.append((entry, GradientEdge(out.grad_fn, out.output_nr)))  # (the objective holds the graph)
                out.grad_fn.register_prehook(lambda grads, entry=entry: entry.__setitem__(2, grads[0]))
            return out

        return types.MethodType(record, m)

    def _writer(self, m: nn.Module):
        """``m``'s own forward (``inplace=True``), recording the storage it writes (its input's, public
        ``untyped_storage().data_ptr()``) and after how many recorded calls, for :meth:`_overwritten`."""
        forward = type(m).forward

        def write(layer, *args, **kwargs):
            if layer is m and self.seen is not None and args and isinstance(args[0], torch.Tensor):
                self.writes.append((len(self.seen), args[0].untyped_storage().data_ptr(), m))
            return forward(layer, *args, **kwargs)

        return types.MethodType(write, m)

    def norms(self, rows: torch.Tensor, *, n: int, check: bool = False, seed: int = 0):
        """Per-sample squared gradient norms (n,) of ``rows`` (each sample's objective, (n,), computed from the recorded
        forward of a batch of ``n`` rows) and a function ``clipped_sums(scale, into)`` writing each trainable
        parameter's sum_i s_i grad_i (per-sample scales s, (n,)) into ``into[parameter]`` (a tensor of its size); None
        where the tape did not record or a run-time check fails (:attr:`why` says which; ``torch.func`` is exact
        there). The one backward (of rows.sum()) asks autograd for the gradients of the recorded outputs only (their
        edges): it forms no parameter gradient (Bu et al. 2023's book-keeping: the clipped sums are formed once, from
        the recorded rows). With ``check``, two more backwards check that the rows' gradients are the samples' own
        (``row_checks.gradient_mixing``); where they are not, :class:`ProtocolError` (no update on either path is
        private then)."""
        edges, self.edges = self.edges, []  # the graph's nodes are not held past this update
        out = rows.sum()
        self.why = self._unread(rows, n, edges, check=check, out=out)
        if self.why:
            return None
        weights = gradient_weights(n, rows, seed=seed) if check and n > 1 else []
        weighted = [self._gradients((rows * w).sum(), edges, retain=True) for w in weights]
        grads = self._gradients(out, edges)
        missing = next((e[0] for (e, _), g in zip(edges, grads) if g is None), None)
        if missing is not None:
            name = f"{class_named(missing)} {self.names[id(missing)]!r}"
            self.why = f"the output of {name} does not reach the rows sent"
            return None
        mixed = "" if not weights else gradient_mixing(
            [f"{class_named(e[0])} {self.names[id(e[0])]!r}" for e, _ in edges], grads, weighted, weights)
        if mixed:
            raise ProtocolError(f"embedding-dp: {mixed}; its argument covers bottoms whose rows depend on their own "
                                "sample only, in the forward and the backward (the tape cannot tell which mixed): the "
                                "run fails, no epsilon is recorded")
        return sums([(m, a, g) for ((m, a, _), _), g in zip(edges, grads)])

    def recorded(self, rows: torch.Tensor, *, n: int) -> list | None:
        """Each trainable layer's (name, input rows, output gradient rows or None) of the recorded forward, from one
        backward of ``rows.sum()``; None where the tape did not record or the records are not what the rules read
        (:attr:`why` says which). For ``tape_checks.record_mixing``: what the update reads, compared across batches."""
        edges, self.edges = self.edges, []
        self.why = self._unread(rows, n, edges)
        if self.why:
            return None
        grads = self._gradients(rows.sum(), edges)
        return [(f"{class_named(m)} {self.names[id(m)]!r}", a, g) for ((m, a, _), _), g in zip(edges, grads)]

    def _unread(self, rows: torch.Tensor, n: int, edges: list, *, check: bool = False, out=None) -> str:
        """Why the recorded forward is not what the rules read, or '': nothing recorded, rows without a gradient,
        the calls misread or an input overwritten (with ``check``, rewritten by a hook; with ``out``, a parameter
        reused on its graph), or a trainable layer's output outside the graph."""
        if self.seen is None:
            return "the tape recorded no forward"
        if not rows.requires_grad:
            return "the rows do not require a gradient"
        return (self._misread(n) or self._overwritten() or (self._rewritten() if check else "")
                or (self._reused(out) if out is not None else "")
                or ("" if len(edges) == len(self.layers) else "a trainable layer's output does not require a gradient"))

    @staticmethod
    def _gradients(out: torch.Tensor, edges: list, *, retain: bool = False) -> list:
        """The gradient of ``out`` reaching each recorded output's node (its pre-hook's, after the tensor hooks, where
        the node ran; autograd's captured one where it did not), or None where it does not reach it."""
        for entry, _ in edges:
            entry[2] = None  # what an earlier backward through these outputs (another loss's) recorded
        captured = torch.autograd.grad(out, [edge for _, edge in edges], allow_unused=True, retain_graph=retain)
        return [(g if entry[2] is None else entry[2]) for (entry, _), g in zip(edges, captured)]

    def _misread(self, n: int) -> str:
        """Why the recorded calls are not what the rules read (each trainable covered layer once; every covered layer,
        frozen or not, on its rule's rank with a first dimension of the batch's n: a frozen Conv2d given a 3-D batch
        reads it as channels), or ''."""
        calls = Counter(id(e[0]) for e in self.seen)
        for m in self.layers:
            if calls[id(m)] != 1:
                return f"{class_named(m)} {self.names[id(m)]!r} was called {calls[id(m)]} time(s), not once"
        for m, a, _ in self.seen:
            if a.dim() != _DIMS[type(m)] or a.shape[0] != n:
                return (f"{class_named(m)} {self.names[id(m)]!r} was called on {tuple(a.shape)}, not on the "
                        f"batch's {n} rows of rank {_DIMS[type(m)]}")
        return ""

    def _overwritten(self) -> str:
        """Why a trainable layer's recorded input is not what it computed with, or '': an in-place module called after
        it wrote that input's storage (held by the record, so no pointer is reused): ``Seq(Identity(),
        ReLU(inplace=True), Linear)`` beside another tower; a frozen layer whose forward hook returns its input, then
        ``ReLU(inplace=True)`` (the third review: an exemption for in-place modules right after a layer trusted the
        layer's output to be new)."""
        if not self.writes:
            return ""
        trained = {id(m) for m in self.layers}
        for k, (m, a, _) in enumerate(self.seen):
            ptr = a.untyped_storage().data_ptr() if id(m) in trained else 0
            writer = next((w for after, at, w in self.writes if after > k and at == ptr != 0), None)
            if writer is not None:
                return (f"{class_named(writer)} {self.names[id(writer)]!r} wrote in place the input "
                        f"{class_named(m)} {self.names[id(m)]!r} had recorded")
        return ""

    def _rewritten(self) -> str:
        """Why a trainable layer's recorded input is not the one it computed with, or '': written in place after its
        call (a forward hook's ``inp[0].mul_(3)``: the rules would read the written rows). Compared on the copies a
        forward with ``keep`` made (the checked update's; later forwards keep none)."""
        m = next((e[0] for e, copy in self.inputs if not torch.equal(e[1], copy)), None)
        return "" if m is None else \
            f"the input {class_named(m)} {self.names[id(m)]!r} had recorded was written in place after its call"

    def _reused(self, out: torch.Tensor) -> str:
        """Why the autograd graph of ``out`` is not the rules' (a walk of its nodes, about 10 microseconds on digits'
        bottom), or '': a trainable parameter reached by other than exactly one edge (a hook or module using it outside
        its layer's call adds one: its gradient is more than the rule's; each parameter's accumulator found by the
        public ``get_gradient_edge``, none held between updates: a device or dtype change replaces it), or a custom
        autograd Function (a full backward hook's, any hook's own), whose backward may mix the rows' gradients."""
        accumulators = {get_gradient_edge(p).node: k for k, p in enumerate(self.params)}
        edges = [0] * len(self.params)
        seen, stack = {out.grad_fn}, [out.grad_fn]
        while stack:
            for node, _ in stack.pop().next_functions:
                if node in accumulators:
                    edges[accumulators[node]] += 1
                elif node is not None and node not in seen:
                    if isinstance(node, BackwardCFunction):
                        return f"the objective's graph holds a custom autograd Function ({node.name()}: a hook's)"
                    seen.add(node)
                    stack.append(node)
        odd = [k for k, count in enumerate(edges) if count > 1]  # none: the rows do not reach the layer (checked after)
        return f"a trainable parameter {tuple(self.params[odd[0]].shape)} is reached by {edges[odd[0]]} edges of the " \
            "objective's graph, not by its layer's call alone" if odd else ""


def ghost_grads(module: nn.Module, objective, x: torch.Tensor, *, check: bool = False, seed: int = 0):
    """:meth:`GhostTape.norms` of ``objective(module(x))`` (each sample's objective, (n,)), from a forward of its
    own."""
    tape = GhostTape(module)
    tape.keep = check
    with tape:
        rows = objective(module(x))
    return tape.norms(rows, n=x.shape[0], check=check, seed=seed)


def func_grads(inner: nn.Module, row_clip: float, x: torch.Tensor, received: torch.Tensor) -> dict:
    """Each sample's gradient of its own clipped row times the gradient it received, for every trainable parameter of
    ``inner``, by ``torch.func`` (one vectorised forward and backward over the batch); ``inner`` keeps its own
    parameter objects (what the optimizer updates)."""
    params = {k: p.detach() for k, p in inner.named_parameters() if p.requires_grad}
    frozen = {k: p.detach() for k, p in inner.named_parameters() if not p.requires_grad}
    buffers = dict(inner.named_buffers())

    def objective(theta: dict, row: torch.Tensor, got: torch.Tensor) -> torch.Tensor:
        h = torch.func.functional_call(inner, ({**theta, **frozen}, buffers), (row.unsqueeze(0),))
        return (clip_rows(h, clip=row_clip) * got.unsqueeze(0)).sum()

    try:  # randomness "different": a Dropout draws each sample's mask afresh (a per-row mask, as in the forward)
        with kept_state(inner):
            grads = torch.func.vmap(torch.func.grad(objective), in_dims=(None, 0, 0), randomness="different")(
                params, x.clone(), received)  # a copy: an in-place module would write the caller's batch
    except RuntimeError as error:  # a forward torch.func cannot trace (data-dependent control flow, .item())
        raise ProtocolError(f"embedding-dp: the per-sample gradients of the bottom {type_path(type(inner))} cannot "
                            f"be computed by torch.func (its forward: {str(error).splitlines()[0][:200]}); build it "
                            "of modules the tape covers (Linear, Conv2d, frozen BatchNorm, row-wise activations "
                            "including RReLU and Dropout, nn.Sequential) or write its "
                            "forward of operations torch.func can vectorise (no data-dependent Python control flow, no "
                            "in-place write to an input another module reads)") from error
    if any(g.requires_grad for g in grads.values()):  # a real parameter entered: torch.func took it for a constant
        raise ProtocolError(f"embedding-dp: a trainable parameter of the bottom {type_path(type(inner))} is reached "
                            "outside the bottom's own attributes (a tensor a hook or closure captured): torch.func's "
                            "per-sample gradients miss its use there; reach it through its module")
    return grads
