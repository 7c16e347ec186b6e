"""Whether a bottom is built only of modules whose forward vflpriv knows: embedding-dp's premise (each sent row a
function of its own sample) is proven for those, and only tested for any other (issue 47).

The probes (``row_checks``, ``tape_checks``) test the premise on the batch's own values; replace-one allows any value,
so a mixing gated on values the batch lacks passes them (batch-mean imputation that mixes only where a NaN appears).
The rule: every module's class is defined in vflpriv or in torch.nn (their forwards are read, or are torch's layers,
whose rows are independent once embedding-dp freezes BatchNorm), no instance carries its own method (``m.forward =``),
and no forward or backward hook is registered, on a module or globally. torch lists hooks through no public API, so
their dictionaries are read by name, failing closed: where torch keeps none by that name, the bottom counts as foreign.
"""

from __future__ import annotations

import torch.nn.modules.module as _torch_module
from torch import nn

#: Where a module's class may be defined for its forward to be known (its ``__module__``, this or below it).
_OWN_PACKAGES = ("vflpriv", "torch.nn")
#: The hook dictionaries a module (and torch's module globally, with ``_global``) keeps, torch 2.x.
_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def foreign_part(module: nn.Module) -> str:
    """'' for a bottom built only of vflpriv's and torch.nn's modules, without instance methods or hooks; otherwise
    what makes it foreign, for the run's notes."""
    hooked = [k for k in _HOOKS if getattr(_torch_module, f"_global{k}", None) != {}]
    if hooked:
        return f"a global module hook ({', '.join(hooked)})"
    for name, m in module.named_modules(remove_duplicate=False):
        kind, where = type(m), f"'{name or 'the bottom'}'"
        if not any(kind.__module__ == p or kind.__module__.startswith(p + ".") for p in _OWN_PACKAGES):
            return f"{where} is a {kind.__module__}.{kind.__qualname__}, a class outside vflpriv and torch.nn"
        own = [k for k, v in vars(m).items() if callable(v) and callable(getattr(kind, k, None))]
        if own:
            return f"{where} carries its own {', '.join(own)} (an instance method: its class's forward is not what runs)"
        hooked = [k for k in _HOOKS if getattr(m, k, None) != {}]
        if hooked:
            return f"{where} has a hook ({', '.join(hooked)})"
    return ""
