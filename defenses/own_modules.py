"""Whether a bottom is built only of modules whose forward vflpriv knows: embedding-dp's premise (each sent row a
function of its own sample) is proven for those, and only tested for any other (issue 47).

The probes (``row_checks``, ``tape_checks``) test the premise on the batch's own values; replace-one allows any value,
so a mixing gated on values the batch lacks passes them (batch-mean imputation that mixes only where a NaN appears).
The rule: every module's class is one of vflpriv's whose forward was read (:data:`_READ`, by identity: not any class of
a ``vflpriv.`` module, e.g. ``PooledEstimator``'s fitted lookup) or one of torch.nn's layers listed in
:data:`_TORCH_ROWWISE`, whose rows are independent (BatchNorm on running statistics, which embedding-dp freezes; not
every torch.nn module: ``MultiheadAttention`` with ``batch_first=False`` attends across dim 0,
``Embedding(max_norm=...)`` renormalises its weight in the forward from the indices it sees); no instance holds a
callable of its own (``m.forward =``, a function given as ``LocalEncoder``'s bottom, a module hidden from
``named_modules``), and each call of an admitted layer is row-wise (:func:`calls_checked`). Hooks are not part of the
rule: torch lists a module's hooks through no public API, and vflpriv reads no private one, so the claim assumes no hook
registered by other code (the epsilon's note says so); the probes see a hook only where it mixes the batch's rows at the
checked update.
"""

from __future__ import annotations

import contextlib
import sys

import torch
from torch import nn
from torch.nn.parameter import is_lazy

from vflpriv.common.errors import class_named, type_path

#: torch.nn's layers whose output row i depends on input row i alone (BatchNorm on frozen running statistics), by
#: exact type.
_TORCH_ROWWISE = frozenset({
    nn.Linear, nn.Conv2d, nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.Identity, nn.ReLU, nn.ReLU6, nn.LeakyReLU,
    nn.ELU, nn.GELU, nn.SiLU, nn.Tanh, nn.Sigmoid, nn.Softplus, nn.RReLU, nn.Dropout, nn.Flatten, nn.Unflatten,
    nn.MaxPool2d, nn.AvgPool2d, nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d, nn.Embedding, nn.LayerNorm, nn.Sequential,
    nn.ModuleList, nn.ModuleDict})

#: vflpriv's classes whose forwards were read (each child called once, on the batch's rows, row by row): by identity,
#: once their module is loaded (a module name is a string any class can set; defenses import no method).
_READ = (("vflpriv.models.encoders", ("TabularInput", "MLPEncoder", "CNNEncoder")),
         ("vflpriv.methods.towers", ("LocalEncoder", "PooledEncoder")),
         ("vflpriv.methods.finetune", ("WithLogits",)),
         ("vflpriv.defenses.fi_adversarial", ("CutBottleneck",)))
#: The admitted BatchNorms: row-wise only on running statistics (``track_running_stats=True``), which embedding-dp
#: freezes.
_BATCHNORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def foreign_part(module: nn.Module) -> str:
    """'' for a bottom built only of vflpriv's modules and torch.nn's row-wise layers, without instance methods;
    otherwise what makes it foreign, for the run's notes."""
    for name, m in module.named_modules(remove_duplicate=False):
        kind, where = type(m), f"'{name or 'the bottom'}'"
        if not read_class(kind) and kind not in _TORCH_ROWWISE:
            return (f"{where} is a {type_path(kind)}, neither one of vflpriv's bottoms whose "
                    "forward was read nor a row-wise torch.nn layer")
        if kind in _BATCHNORMS and m.running_mean is None:
            return (f"{where} is a BatchNorm without running statistics (it normalises with each batch's, in eval "
                    "mode too: every row depends on its batch)")
        if kind is nn.Embedding and m.max_norm is not None:
            return f"{where} is an Embedding with max_norm (it renormalises its weight from the indices it sees)"
        own = carried(m)
        if own:
            return (f"{where} carries its own callable {', '.join(own)} (a function or module outside its class's "
                    "forward and registered children: code no one read)")
    return ""


def foreign_tensors(module: nn.Module, x: object) -> str:
    """'' where the batch is exactly a torch.Tensor and each parameter and buffer of ``module`` exactly an
    nn.Parameter / torch.Tensor; else which is not (a subclass's ``__torch_function__`` can mix rows in any op)."""
    if type(x) is not torch.Tensor:
        return f"the batch is a {type_path(type(x))}, not a torch.Tensor (its class's operations were not read)"
    tensors = [*((k, p, nn.Parameter) for k, p in module.named_parameters()),
               *((k, b, torch.Tensor) for k, b in module.named_buffers())]
    return next((f"'{k}' is a {type_path(type(t))}, not a {kind.__name__} (its class's operations were not read)"
                 for k, t, kind in tensors if type(t) is not kind and not is_lazy(t)), "")


def read_class(kind: type) -> bool:
    """Whether ``kind`` is one of vflpriv's classes whose forward was read (:data:`_READ`)."""
    return any(kind is getattr(sys.modules.get(module), name, None) for module, names in _READ for name in names)


def carried(m: nn.Module) -> list[str]:
    """The callables ``m``'s instance holds itself (``vars(m)``: a function, a method, a module set with
    ``object.__setattr__``); torch's own layers and vflpriv's read ones hold none (their children are registered)."""
    return [k for k, v in vars(m).items() if callable(v)]


def _rank(*ranks: int):
    return lambda m, a: a.dim() in ranks


#: Per admitted torch.nn layer whose rows stay apart only on some inputs, the condition on each call's input (besides
#: dim 0 being the batch's n): a Conv2d or pool on a 3-D tensor takes the batch for channels, a Flatten / Unflatten
#: from dim 0 or a LayerNorm over every dim spans the batch axis. Elementwise layers hold on any shape.
_CALL_RULES = {
    nn.Linear: lambda m, a: a.dim() >= 2,
    nn.Conv2d: _rank(4), nn.BatchNorm2d: _rank(4), nn.MaxPool2d: _rank(4), nn.AvgPool2d: _rank(4),
    nn.AdaptiveAvgPool2d: _rank(4), nn.AdaptiveMaxPool2d: _rank(4), nn.BatchNorm1d: _rank(2, 3),
    nn.BatchNorm3d: _rank(5),
    nn.Flatten: lambda m, a: m.start_dim % a.dim() >= 1,
    nn.Unflatten: lambda m, a: isinstance(m.dim, int) and m.dim % a.dim() >= 1,
    nn.LayerNorm: lambda m, a: len(m.normalized_shape) < a.dim(),
}


@contextlib.contextmanager
def calls_checked(module: nn.Module, n: int, report):
    """Inside, each call of an admitted layer of ``module`` with a rule (:data:`_CALL_RULES`) checks its input (dim 0
    the batch's ``n``, and the rule): row-wise is a property of the call, not the type; ``report(why)`` on the first
    one off (a pre-hook, public API, removed on exit). ``PrivateRows`` runs it at the first forward of each input
    shape since its last ``train()`` / ``eval()``: an admitted layer's configuration is fixed and a read class's
    reshapes follow its input's shape, so the calls' shapes are a function of the input's (about 0.1 ms a forward)."""
    def check(m, args):
        a = args[0] if args else None
        if not (isinstance(a, torch.Tensor) and a.dim() >= 1 and a.shape[0] == n and _CALL_RULES[type(m)](m, a)):
            name = next((k for k, c in module.named_modules() if c is m), "?") or "the bottom"
            report(f"'{name}' ({class_named(m)}) was called on {tuple(getattr(a, 'shape', ()))}, not on "
                   f"the batch's {n} rows as a row-wise layer (its rows would mix)")

    handles = [m.register_forward_pre_hook(check) for m in module.modules() if type(m) in _CALL_RULES]
    try:
        yield
    finally:
        for h in handles:
            h.remove()
