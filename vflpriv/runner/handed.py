"""What an attack is handed is for it to read, not to change: the messages in its inbox are every attack of the
training's, and a label attack's view is what its prior reads after it. A plugin that normalises them in place
would move numbers that are not its own, so the runner compares a digest of their bytes before and after the attack
(no copy of the inbox, which holds every message of the training; about 2 GB/s of tensors with SHA-1, used only to
detect a change, never as a security boundary): any change is seen, through ``.data`` too."""

from __future__ import annotations

import hashlib
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


def tensors_digest(*values: object) -> bytes:
    """A digest of the dtype, shape and bytes of every tensor in ``values`` (tensors, mappings and sequences of them,
    inboxes): equal before and after exactly where nothing was changed (up to SHA-1 collisions)."""
    digest = hashlib.sha1(usedforsecurity=False)
    for value in values:
        for t in _tensors(value):
            t = t.detach().to_dense() if t.layout != torch.strided else t.detach()  # a sparse payload: its values
            digest.update(f"{t.dtype}{tuple(t.shape)}".encode())
            digest.update(t.reshape(-1).contiguous().view(torch.uint8).cpu().numpy())
    return digest.digest()


def changed_in_place(attack: object, name: str, what: str) -> str:
    """The reason an attack's run fails when it changed ``what`` in place, naming the attack and its class."""
    return (f"attack '{name}' ({type(attack).__module__}.{type(attack).__qualname__}) changed in place {what}; copy "
            "a tensor before changing it")
