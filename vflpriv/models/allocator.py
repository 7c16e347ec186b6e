"""glibc's malloc tuned for training loops: freed tensor buffers stay in the process and are reused.

glibc serves every allocation above its mmap threshold (128 KiB, rising to at most 32 MiB) with a fresh
``mmap`` and unmaps it on free, so a training step that allocates the same activation buffers every step
pays the kernel's page faults for them again each time: a CNN step on 1024 Fashion-MNIST halves spent a
third of its time in the kernel (``benchmarks/allocator.py`` measures it). With mmap off and trimming
deferred, freed buffers return to malloc's free lists and the next step reuses them. The price is that the
process keeps its peak heap until it exits, which for a training process is what it needs anyway.

Set ``VFLPRIV_SYSTEM_MALLOC=1`` to leave malloc alone; other C libraries are left alone.
"""

from __future__ import annotations

import ctypes
import os

_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
#: glibc's defaults, to restore them.
SYSTEM = {"trim_threshold": 128 * 1024, "mmap_max": 65536}
#: Training's settings: no mmap'd chunks, the heap's top trimmed only above 1 GiB free.
REUSE = {"trim_threshold": 1 << 30, "mmap_max": 0}
_applied: dict[str, int] | None = None


def _mallopt():
    try:
        return ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return None


def set_malloc(settings: dict[str, int]) -> bool:
    """Apply ``settings`` (``REUSE`` or ``SYSTEM``) with glibc's ``mallopt``; False where there is no glibc."""
    global _applied
    mallopt = _mallopt()
    if mallopt is None:
        return False
    ok = mallopt(_M_MMAP_MAX, settings["mmap_max"]) == 1 and mallopt(_M_TRIM_THRESHOLD, settings["trim_threshold"]) == 1
    _applied = settings if ok else None
    return ok


def reuse_freed_memory() -> bool:
    """Switch this process to ``REUSE`` once (idempotent); True when it is in effect."""
    if os.environ.get("VFLPRIV_SYSTEM_MALLOC", "") not in ("", "0"):
        return False
    return _applied is REUSE or set_malloc(REUSE)
