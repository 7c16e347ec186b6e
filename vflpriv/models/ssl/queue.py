"""MoCo's queue of negative keys (FedHSSL Eq. 2: the set Q; 4096 keys in the paper)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


class MemoryQueue:
    """Fixed-size FIFO ring buffer of L2-normalised keys; the oldest keys are overwritten first.

    Starts filled with random unit vectors drawn from ``generator`` (on the generator's device, so a seed draws the
    same keys everywhere) and kept on ``device`` (the keys' and queries' device: default the generator's).
    ``negatives()`` returns the live buffer without copying, so call ``enqueue`` only after the
    backward pass of any loss that used it (autograd saved the buffer and would see it modified).
    """

    def __init__(self, dim: int, *, size: int = 4096, generator: torch.Generator,
                 device: torch.device | str | None = None) -> None:
        if dim < 1 or size < 1:
            raise ValueError(f"dim and size must be positive, got dim={dim}, size={size}")
        init = torch.randn(size, dim, generator=generator, device=generator.device)
        self._buffer = F.normalize(init, dim=1).to(device or generator.device)
        self._ptr = 0

    @property
    def size(self) -> int:
        return self._buffer.shape[0]

    @torch.no_grad()
    def enqueue(self, keys: Tensor) -> None:
        """Append a batch of keys ([b, dim]), wrapping around; only the last ``size`` are kept."""
        keys = F.normalize(keys.detach(), dim=1).to(self._buffer.dtype)
        size = self.size
        if keys.shape[0] > size:
            keys = keys[-size:]
        b = keys.shape[0]
        first = min(b, size - self._ptr)
        self._buffer[self._ptr : self._ptr + first] = keys[:first]
        self._buffer[: b - first] = keys[first:]
        self._ptr = (self._ptr + b) % size

    def negatives(self) -> Tensor:
        """The [size, dim] buffer itself (a view, no copy)."""
        return self._buffer
