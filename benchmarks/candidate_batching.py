"""Does training several attack configurations together pay on these CPUs? (issue 26, item 3)

A tuned MixMatch completion trains up to 8 candidates of one architecture on the same data. Two ways to make that
cheaper were measured here against one-at-a-time training, in one process, interleaved (these machines are noisy):

- batching: the C candidates' parameters stacked and trained as one model with ``torch.func`` (``vmap`` of the
  gradient over the stacked parameters, one Adam update over the stacks; every candidate sees the same batches, as
  in a search with common random numbers). Per-step time per candidate vs one model's step, for C = 2, 4, 8, at
  the audit's shapes (a digits half: 32 features, vflpriv's 512-wide MLP bottom, batch 64) and at the VFLAIR
  experiment's (benchmarks/results/vflair_comparison.md: six trainings of a breast-cancer half, 15 features,
  batch 16, one per noise level).
- pruning: successive halving (``attacks.search``, eta 4) vs every candidate whole, counted in optimiser steps of a
  tuned ``mc-mixmatch`` at the audit's options (10 epochs x 25 steps, 8 candidates, then the refit).

    python benchmarks/candidate_batching.py [--steps 200] [--repeats 3]

vflpriv trains candidates one at a time: batching was not adopted (see the ratios it prints).
"""

from __future__ import annotations

import argparse
import copy
import math
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, stack_module_state, vmap

from vflpriv.attacks.labels.mixmatch import MixMatchCompletion
from vflpriv.attacks.search import ETA
from vflpriv.config.schema import ModelConfig
from vflpriv.data.base import PartySpec
from vflpriv.models.allocator import reuse_freed_memory
from vflpriv.models.encoders import build_encoder

CLASSES = {"audit (digits half, batch 64)": (32, 10, 64), "VFLAIR experiment (batch 16)": (15, 2, 16)}
ROWS = 512


def make_model(features: int, classes: int, seed: int) -> nn.Module:
    """vflpriv's bottom for the shapes plus mc-mixmatch's head (BN -> ReLU -> Linear)."""
    g = torch.Generator().manual_seed(seed)
    bottom = build_encoder(PartySpec("tabular", (features,)), ModelConfig(), generator=g)
    head = nn.Sequential(nn.BatchNorm1d(bottom.out_dim), nn.ReLU(), nn.Linear(bottom.out_dim, classes))
    return nn.Sequential(bottom, head).train()


def data(features: int, classes: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return torch.randn(ROWS, features, generator=g), torch.randint(classes, (ROWS,), generator=g), torch.randn(
        ROWS, features, generator=g)


def mixed_batch(x, y, u, q_of, classes: int, batch: int, g: torch.Generator):
    """MixMatch's inputs and targets for one step; ``q_of(u)`` guesses the unlabeled rows' labels."""
    li, ui = torch.randint(ROWS, (batch,), generator=g), torch.randint(ROWS, (batch,), generator=g)
    with torch.no_grad():
        q = q_of(u[ui]).softmax(-1).pow(1 / 0.8)
        q = q / q.sum(-1, keepdim=True)
    onehot = F.one_hot(y[li], classes).float()
    perm = torch.randperm(2 * batch, generator=g)
    inputs = torch.cat([x[li], u[ui]])
    return 0.7 * inputs + 0.3 * inputs[perm], onehot, q, perm


def loss_of(logits, onehot, q, perm, batch: int):
    targets = torch.cat([onehot.expand(*logits.shape[:-2], -1, -1), q], -2)
    mixed = 0.7 * targets + 0.3 * targets[..., perm, :]
    return (-(F.log_softmax(logits[..., :batch, :], -1) * mixed[..., :batch, :]).sum(-1).mean(-1)
            + 50 * (logits[..., batch:, :].softmax(-1) - mixed[..., batch:, :]).pow(2).mean((-1, -2)))


def one_at_a_time(shape: tuple[int, int, int], candidates: int, steps: int) -> float:
    """Seconds per step per candidate, training ``candidates`` models one after another."""
    features, classes, batch = shape
    x, y, u = data(features, classes)
    total = 0.0
    for c in range(candidates):
        model, g = make_model(features, classes, c), torch.Generator().manual_seed(1)
        opt = torch.optim.Adam(model.parameters(), lr=2e-3)
        start = time.perf_counter()
        for _ in range(steps):
            inputs, onehot, q, perm = mixed_batch(x, y, u, model, classes, batch, g)
            loss = loss_of(model(inputs), onehot, q, perm, batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        total += time.perf_counter() - start
    return total / steps / candidates


def batched(shape: tuple[int, int, int], candidates: int, steps: int) -> float:
    """Seconds per step per candidate, the candidates stacked and trained together (vmap + one Adam on stacks)."""
    features, classes, batch = shape
    x, y, u = data(features, classes)
    models = [make_model(features, classes, c) for c in range(candidates)]
    params, buffers = stack_module_state(models)
    params = {k: v.detach() for k, v in params.items()}
    base = copy.deepcopy(models[0]).to("meta")
    lr = torch.full((candidates,), 2e-3)

    def forward(p, b, inputs):
        return functional_call(base, (p, b), (inputs,))

    def loss(p, b, inputs, onehot, q, perm):
        return loss_of(functional_call(base, (p, b), (inputs,)), onehot, q, perm, batch)

    gradient = vmap(grad(loss), in_dims=(0, 0, None, None, 0, None))
    guesses = vmap(forward, in_dims=(0, 0, None))
    m1 = {k: torch.zeros_like(v) for k, v in params.items()}
    m2 = {k: torch.zeros_like(v) for k, v in params.items()}
    g = torch.Generator().manual_seed(1)
    start = time.perf_counter()
    for step in range(1, steps + 1):
        inputs, onehot, q, perm = mixed_batch(x, y, u, lambda rows: guesses(params, buffers, rows), classes, batch, g)
        grads = gradient(params, buffers, inputs, onehot, q, perm)
        for k, p in params.items():
            m1[k].lerp_(grads[k], 0.1)
            m2[k].mul_(0.999).addcmul_(grads[k], grads[k], value=0.001)
            scale = (lr / (1 - 0.9 ** step)).view(-1, *[1] * (p.dim() - 1))
            p.sub_(scale * m1[k] / ((m2[k] / (1 - 0.999 ** step)).sqrt() + 1e-8))
    return (time.perf_counter() - start) / steps / candidates


def halving_steps(candidates: int, steps: int) -> int:
    """Optimiser steps of ``attacks.search``'s successive halving (eta ETA) on ``candidates``, budget ``steps``."""
    rounds, alive, total = max(1, math.ceil(math.log(candidates, ETA) - 1e-9)), candidates, 0
    epochs = steps // MixMatchCompletion.audit_options["iterations"]
    for r in range(rounds):
        total += alive * max(1, round(epochs * float(ETA) ** (r - rounds))) * MixMatchCompletion.audit_options[
            "iterations"]
        alive = max(1, math.ceil(alive / ETA))
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    reuse_freed_memory()
    for label, shape in CLASSES.items():
        sizes = (2, 4, 8) if shape[2] == 64 else (6,)
        for c in sizes:
            one_at_a_time(shape, 1, 10), batched(shape, c, 5)  # warm-up
            single = statistics.median(one_at_a_time(shape, c, args.steps) for _ in range(args.repeats))
            together = statistics.median(batched(shape, c, args.steps) for _ in range(args.repeats))
            print(f"{label}, {c} candidates: one at a time {single * 1e3:.2f} ms/step, together "
                  f"{together * 1e3:.2f} ms/step per candidate: speed-up {single / together:.2f}x")
    o = MixMatchCompletion.audit_options
    budget = o["epochs"] * o["iterations"]
    pruned, whole = halving_steps(8, budget) + budget, 8 * budget + budget
    print(f"pruning, tuned mc-mixmatch at the audit's {budget} steps, 8 candidates + the refit: successive halving "
          f"(eta {ETA}) {pruned} steps, every candidate whole {whole} steps: {whole / pruned:.2f}x fewer; "
          f"{pruned / budget:.2f}x the untuned attack")


if __name__ == "__main__":
    main()
