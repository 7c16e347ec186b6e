"""What an attack is handed is for it to read, not to change: the messages in its inbox are every attack of the
training's, and a label attack's view is what its prior reads after it. A plugin that normalises them in place
would move numbers that are not its own, so the runner compares each tensor's version counter (which PyTorch bumps
at every in-place change, under ``no_grad`` too) before and after the attack, at no cost: no copy of the inbox, which
holds every message of the training. A write through ``.data`` bypasses the counter and is not seen."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import torch

from vflpriv.engine.channel import Inbox, Received


def _tensors(value: object) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _tensors(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, Received):
        yield from _tensors(value.payload)
        yield from _tensors(value.sample_ids)
    elif isinstance(value, Inbox):
        yield from _tensors(value.received)


def versions(*values: object) -> tuple[int, ...]:
    """The version counter of every tensor in ``values`` (tensors, mappings and sequences of them, inboxes)."""
    return tuple(t._version for value in values for t in _tensors(value))


def changed_in_place(attack: object, name: str, what: str) -> str:
    """The reason an attack's run fails when it changed ``what`` in place, naming the attack and its class."""
    return (f"attack '{name}' ({type(attack).__module__}.{type(attack).__qualname__}) changed in place {what}; copy "
            "a tensor before changing it")
