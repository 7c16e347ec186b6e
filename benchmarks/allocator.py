"""Training step time with glibc's default malloc vs vflpriv's buffer reuse (vflpriv.models.allocator), and
with channels-last CNN tensors, measured in one process, one thread, on a Fashion-MNIST-sized CNN step.

    python benchmarks/allocator.py [--batch 1024] [--steps 5]
"""

from __future__ import annotations

import argparse
import resource
import time

import torch

from vflpriv.data.base import PartySpec
from vflpriv.models.allocator import REUSE, SYSTEM, set_malloc
from vflpriv.models.encoders import CNNEncoder


def step_seconds(*, batch: int, steps: int, channels_last: bool) -> tuple[float, float]:
    """(wall, system) seconds per SGD step of the CNN encoder on ``batch`` 1x28x14 images."""
    torch.manual_seed(0)
    model = CNNEncoder(PartySpec("image", (1, 28, 14)), out_dim=512)
    x = torch.rand(batch, 1, 28, 14)
    if channels_last:
        model, x = model.to(memory_format=torch.channels_last), x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def one() -> None:
        model(x).pow(2).mean().backward()
        opt.step()
        opt.zero_grad()

    one()
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(steps):
        one()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    return (time.perf_counter() - t0) / steps, (r1.ru_stime - r0.ru_stime) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = {}
    for label, malloc, cl in [("glibc default", SYSTEM, False), ("reuse", REUSE, False),
                              ("glibc default, channels-last", SYSTEM, True), ("reuse, channels-last", REUSE, True)]:
        set_malloc(malloc)
        rows[label] = step_seconds(batch=args.batch, steps=args.steps, channels_last=cl)
        print(f"{label:30s} {rows[label][0]:.3f} s/step (system {rows[label][1]:.3f} s)", flush=True)
    base = rows["glibc default"][0]
    for label, (wall, _) in rows.items():
        print(f"speedup vs glibc default: {label:30s} {base / wall:.2f}x")


if __name__ == "__main__":
    main()
