"""What an optimiser step costs: vflpriv's fused Adam and SGD (torch's public functional optimisers, fused) vs the
``torch.optim`` classes (fused and foreach), on a digits-sized MLP (the shape of vflpriv's bottoms), and what a new
process pays for its first step (torch.optim's classes import ``torch._dynamo`` there).

All variants start from the same weights and gradient and must end on the same weights where they are the same
algorithm (fused: bit for bit). Timings are interleaved, median of several repeats, one torch thread, one process
(the first-step figures each in a fresh process). ``--kernel`` also times 0.1's direct call of torch's private
fused kernel (the record of what leaving it cost; vflpriv itself no longer calls it).

    python benchmarks/optimizers.py [--steps 2000] [--repeats 5] [--kernel]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

import torch
from torch import nn

from vflpriv.models.optim import FusedAdam, FusedSGD


def model() -> nn.Module:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(32, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Linear(128, 128), nn.BatchNorm1d(128),
                        nn.ReLU(), nn.Linear(128, 64))
    net(torch.randn(64, 32, generator=torch.Generator().manual_seed(1))).pow(2).mean().backward()
    return net


class PrivateKernelAdam:
    """0.1's Adam: torch's private fused kernel called directly (kept here only to measure what leaving it cost)."""

    def __init__(self, params, lr):
        self.params, self.lr = list(params), lr
        self.state = [(torch.zeros(()), torch.zeros_like(p), torch.zeros_like(p)) for p in self.params]

    @torch.no_grad()
    def step(self):
        steps = [s[0] for s in self.state]
        torch._foreach_add_(steps, 1)
        kernel = getattr(torch, "_fused_adam_")
        kernel(self.params, [p.grad for p in self.params], [s[1] for s in self.state], [s[2] for s in self.state], [],
               steps, amsgrad=False, lr=self.lr, beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8, maximize=False)


VARIANTS = {
    "vflpriv Adam (functional, fused)": lambda ps: FusedAdam(ps, lr=1e-3),
    "torch.optim.Adam(fused=True)": lambda ps: torch.optim.Adam(ps, lr=1e-3, fused=True),
    "torch.optim.Adam(foreach=True)": lambda ps: torch.optim.Adam(ps, lr=1e-3, foreach=True),
    "vflpriv SGD (functional, fused)": lambda ps: FusedSGD(ps, lr=1e-2, momentum=0.9),
    "torch.optim.SGD(fused=True)": lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9, fused=True),
}
FIRST_STEP = """
import sys, time
import torch
p = torch.nn.Parameter(torch.zeros(10)); p.grad = torch.ones(10)
start = time.perf_counter()
{make}.step()
print(time.perf_counter() - start, "torch._dynamo" in sys.modules)
"""


def per_step_us(make, steps: int) -> tuple[float, torch.Tensor]:
    net = model()
    opt = make(list(net.parameters()))
    opt.step()
    start = time.perf_counter()
    for _ in range(steps):
        opt.step()
    return 1e6 * (time.perf_counter() - start) / steps, torch.cat([p.detach().flatten() for p in net.parameters()])


def first_step(make: str) -> tuple[float, bool]:
    out = subprocess.run([sys.executable, "-c", FIRST_STEP.format(make=make)], capture_output=True, text=True,
                         check=True).stdout.split()
    return float(out[0]), out[1] == "True"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--kernel", action="store_true", help="also time 0.1's direct private-kernel call")
    args = parser.parse_args()
    torch.set_num_threads(1)
    variants = dict(VARIANTS)
    if args.kernel:
        variants["0.1: private fused kernel, direct"] = lambda ps: PrivateKernelAdam(ps, lr=1e-3)
    times: dict[str, list[float]] = {name: [] for name in variants}
    weights: dict[str, torch.Tensor] = {}
    for _ in range(args.repeats):
        for name, make in variants.items():
            us, weights[name] = per_step_us(make, args.steps)
            times[name].append(us)
    base = statistics.median(times["vflpriv Adam (functional, fused)"])
    print(f"per step, median of {args.repeats} x {args.steps} steps (1 thread):")
    for name, ts in times.items():
        print(f"  {name:36s} {statistics.median(ts):7.1f} us   ratio to vflpriv Adam {statistics.median(ts) / base:.2f}")
    same = torch.equal(weights["vflpriv Adam (functional, fused)"], weights["torch.optim.Adam(fused=True)"])
    same_sgd = torch.equal(weights["vflpriv SGD (functional, fused)"], weights["torch.optim.SGD(fused=True)"])
    print(f"same weights as torch.optim's fused: Adam {same}, SGD {same_sgd}")
    print("first step in a new process (seconds, torch._dynamo imported):")
    for name, make in (("vflpriv Adam", "__import__('vflpriv.models.optim').models.optim.FusedAdam([p], lr=0.1)"),
                       ("torch.optim.Adam(fused=True)", "torch.optim.Adam([p], lr=0.1, fused=True)")):
        seconds, dynamo = first_step(make)
        print(f"  {name:36s} {seconds:6.3f} s   {dynamo}")


if __name__ == "__main__":
    main()
