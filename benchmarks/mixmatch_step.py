"""What one MixMatch step costs (issue 16, item 4): vflpriv's attack vs a bare loop vs its matrix products.

The VFLAIR comparison is six MixMatch trainings of 10240 steps (Fu et al.'s settings, batch 16, on a
breast-cancer half with vflpriv's 512-wide MLP bottom), so the step time decides it. Three timings,
interleaved in one process (these machines are noisy), medians of the repeats:

- vflpriv: ``MixMatchCompletion.infer`` on a synthetic view of the same shapes (tabular, K = 1);
- bare: the same algorithm as a hand-written loop with no vflpriv code (guess, MixUp, loss, one
  ``torch._fused_adam_`` call, decay, EMA), the floor of eager PyTorch for these operations;
- matrix products: only the 11 GEMMs a step performs (3 layers x 2 forwards, 5 in the backward).

    python benchmarks/mixmatch_step.py [--steps 1000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch
import torch.nn.functional as F

from vflpriv.attacks.labels.mixmatch import MixMatchCompletion, MixMatchOptions
from vflpriv.attacks.labels.model_completion import make_head
from vflpriv.config.schema import ModelConfig
from vflpriv.data.base import PartySpec
from vflpriv.engine import Inbox
from vflpriv.engine.adversary import AdversaryView
from vflpriv.models.allocator import reuse_freed_memory
from vflpriv.models.encoders import build_encoder

FEATURES, UNLABELED, AUX, BATCH = 15, 455, 20, 16
#: The VFLAIR experiment: 6 noise levels x 10 epochs x 1024 steps, shared by the default 2 workers.
STEPS_PER_WORKER = 6 * 10 * 1024 // 2


def view(steps: int, *, seed: int) -> tuple[MixMatchCompletion, AdversaryView]:
    g = torch.Generator().manual_seed(seed)
    spec = PartySpec("tabular", (FEATURES,))
    local = torch.randn(UNLABELED, FEATURES, generator=g)
    encoder = build_encoder(spec, ModelConfig(), generator=g)
    v = AdversaryView(
        party=1, phase="finetune", num_classes=2, spec=spec, encoder=encoder, local_x=local,
        aux_x=local[:AUX], aux_y=torch.arange(AUX) % 2, aux_ids=torch.arange(AUX), targets={"test": local[:64]},
        target_ids={}, inbox=Inbox(owner=1), generator=g, device=torch.device("cpu"))
    return MixMatchCompletion(MixMatchOptions(epochs=1, iterations=steps, batch_size=BATCH)), v


def vflpriv_seconds(steps: int, seed: int) -> float:
    attack, v = view(steps, seed=seed)
    start = time.perf_counter()
    attack.infer(v)
    return time.perf_counter() - start


def bare_seconds(steps: int, seed: int) -> float:
    """Fu et al.'s MixMatch step (T 0.8, alpha 0.75, lambda_u 50, Adam 2e-3, decay 0.02 * lr, EMA 0.999)."""
    _, v = view(steps, seed=seed)
    g = v.generator
    head = make_head("mlp", in_dim=512, num_classes=2, generator=g)
    model = torch.nn.Sequential(copy.deepcopy(v.encoder).requires_grad_(True), head).train()
    ema = copy.deepcopy(model).requires_grad_(False)
    params = list(model.parameters())
    online = params + [b for b in model.buffers() if b.is_floating_point()]
    target = list(ema.parameters()) + [b for b in ema.buffers() if b.is_floating_point()]
    exp_avg = [torch.zeros_like(p) for p in params]
    exp_avg_sq = [torch.zeros_like(p) for p in params]
    step_t = [torch.zeros(()) for _ in params]
    onehot = torch.eye(2)[v.aux_y]
    beta = torch.distributions.Beta(0.75, 0.75)
    start = time.perf_counter()
    for step in range(steps):
        li = torch.randint(AUX, (BATCH,), generator=g)
        ui = torch.randint(UNLABELED, (BATCH,), generator=g)
        u = v.local_x[ui]
        with torch.inference_mode():
            q = model(u).softmax(1).pow(1 / 0.8)
            q = q / q.sum(1, keepdim=True)
        inputs, targets = torch.cat([v.aux_x[li], u]), torch.cat([onehot[li], q])
        lam = float(beta.sample())
        lam = max(lam, 1 - lam)
        perm = torch.randperm(2 * BATCH, generator=g)
        logits = model(lam * inputs + (1 - lam) * inputs[perm])
        mixed_t = lam * targets + (1 - lam) * targets[perm]
        loss = -(F.log_softmax(logits[:BATCH], 1) * mixed_t[:BATCH]).sum(1).mean() + \
            50 * (step + 1) / steps * (logits[BATCH:].softmax(1) - mixed_t[BATCH:]).pow(2).mean()
        for p in params:
            p.grad = None
        loss.backward()
        with torch.no_grad():
            torch._foreach_add_(step_t, 1)
            torch._fused_adam_(params, [p.grad for p in params], exp_avg, exp_avg_sq, [], step_t, amsgrad=False,
                               lr=2e-3, beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8, maximize=False)
            torch._foreach_mul_(params, 1 - 0.02 * 2e-3)
            torch._foreach_lerp_(target, online, 0.001)
    return time.perf_counter() - start


def gemm_seconds(steps: int, seed: int) -> float:
    """The step's matrix products alone: forwards at 16 and 32 rows, weight and input gradients at 32."""
    g = torch.Generator().manual_seed(seed)
    w = [torch.randn(512, FEATURES, generator=g), torch.randn(512, 512, generator=g), torch.randn(2, 512, generator=g)]
    b = [torch.randn(o.shape[0], generator=g) for o in w]
    xs = {rows: [torch.randn(rows, m.shape[1], generator=g) for m in w] for rows in (BATCH, 2 * BATCH)}
    grads = [torch.randn(2 * BATCH, m.shape[0], generator=g) for m in w]
    start = time.perf_counter()
    for _ in range(steps):
        for rows in (BATCH, 2 * BATCH):
            for x, m, bias in zip(xs[rows], w, b):
                torch.addmm(bias, x, m.t())
        for i, (x, m, grad) in enumerate(zip(xs[2 * BATCH], w, grads)):
            torch.mm(grad.t(), x)
            if i:  # the first layer's input needs no gradient
                torch.mm(grad, m)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    reuse_freed_memory()  # as in a training process
    timings: dict[str, list[float]] = {"vflpriv": [], "bare": [], "matrix products": []}
    for r in range(args.repeats + 1):  # the first round warms up
        for name, fn in zip(timings, (vflpriv_seconds, bare_seconds, gemm_seconds)):
            seconds = fn(args.steps, r)
            if r:
                timings[name].append(seconds / args.steps * 1e3)
    ms = {name: statistics.median(t) for name, t in timings.items()}
    for name, t in timings.items():
        print(f"{name}: {ms[name]:.2f} ms/step (repeats: {', '.join(f'{x:.2f}' for x in t)})")
    print(f"vflpriv / bare {ms['vflpriv'] / ms['bare']:.2f}; matrix products are {ms['matrix products'] / ms['bare']:.0%} "
          f"of the bare step; the VFLAIR experiment's {STEPS_PER_WORKER} steps per worker at the vflpriv step: "
          f"{STEPS_PER_WORKER * ms['vflpriv'] / 1e3:.0f} s")


if __name__ == "__main__":
    main()
