"""Fits that several feature attacks on one training repeat, made once per process and reused.

fi-inversion starts from fi-decoder's guess: the same decoder, recipe, known pairs and random stream (both start from
the attack's seeded stream), so an audit that runs both by one adversary trains it twice; grn variants on one
training fit the same surrogate bottom. :func:`shared_fit` trains a network once per key and hands later callers a
copy of the result. The key fixes the result: a digest of the inputs and targets, the network's class and initial
parameters, the recipe, the random stream's state, the device and torch's thread count. Before reuse, the stored
weights and stream position are checked against their digest, which names the key (a mismatch, or another key's fit
under this one, is refitted), and the stream is left where the fit left it, so
a reused fit is bit-identical to a new one (``tests/features/test_shared_fits.py``).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

#: How many fits a process keeps (least recently used dropped): an audit's attacks on one training run together.
KEEP = 8


@dataclass(frozen=True)
class _Fit:
    state: dict[str, torch.Tensor]
    digest: str
    stream_after: torch.Tensor


_FITS: OrderedDict[str, _Fit] = OrderedDict()


def _digest(tensors, *extra: object) -> str:
    h = hashlib.sha256(repr(extra).encode())
    for t in tensors:
        t = t.detach().cpu().contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")  # 0-dim: BN's counter
    return h.hexdigest()


def _fit_digest(key: str, state: dict[str, torch.Tensor], stream_after: torch.Tensor) -> str:
    """What a stored fit is checked against before reuse: its weights, the stream position it left and its own key
    (another key's fit moved under this one, a state missing a tensor or a changed stream do not check out)."""
    return _digest([*state.values(), stream_after], tuple(state), key)


def shared_fit(fit: Callable[..., nn.Module], net: nn.Module, x: torch.Tensor, y: torch.Tensor, *,
               generator: torch.Generator, **recipe: object) -> nn.Module:
    """``fit(net, x, y, generator=generator, **recipe)``, or the weights of an identical earlier fit loaded into
    ``net`` (eval mode) with ``generator`` advanced as that fit advanced it."""
    key = _digest([x, y, *net.state_dict().values(), generator.get_state()], type(net).__qualname__,
                  tuple(net.state_dict()), sorted(recipe.items()), str(x.device), torch.get_num_threads(), fit.__name__)
    found = _FITS.get(key)
    if found is not None and _fit_digest(key, found.state, found.stream_after) == found.digest:
        _FITS.move_to_end(key)
        net.load_state_dict(found.state)
        generator.set_state(found.stream_after)
        return net.eval()
    fit(net, x, y, generator=generator, **recipe)
    state, stream_after = {k: v.detach().clone() for k, v in net.state_dict().items()}, generator.get_state()
    _FITS[key] = _Fit(state, _fit_digest(key, state, stream_after), stream_after)
    while len(_FITS) > KEEP:
        _FITS.popitem(last=False)
    return net
