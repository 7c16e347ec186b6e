"""The label side's per-step CPU, before and after issue 49's same-numbers changes, interleaved in one process.

It runs the same work both ways on one thread (process CPU seconds, medians of the repeats), and checks that
both give the same numbers bit for bit:

- mc-mixmatch's completion (``MixMatchCompletion.infer``, the audit's 240 steps, on a digits-shaped view: 1x8x4
  image halves, the audit's 32-128-128 MLP bottom, 80 labeled and 1437 unlabeled samples): now, against the
  previous step, restored by patching (one ``augment_image`` call per batch, the weights' decay and the EMA tensor by
  tensor).

- ``--change grid``: the crops' sampling grid written out per axis (``box_grid``) against ``F.affine_grid``'s batched
  matmul (the code before, restored by patching), on the completion, on a step's augmentation alone, and on a whole
  tuned search (budget 8: 8 candidates at 12 steps, the best 2 at 60, the winner refitted at 240).

(CAE's label autoencoder was the second pair, ReLUs in place against out of place; its training no longer runs
through the modules: ``benchmarks/cae_autoencoder.py`` measures it now.)

    python benchmarks/label_side_cpu.py [--repeats 5] [--change step|grid]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from unittest import mock

import torch
import torch.nn.functional as F

import vflpriv.attacks.labels.mixmatch as mixmatch
import vflpriv.models.ssl.augment as augment
from vflpriv.attacks.search import search
from vflpriv.attacks.base import AdversaryView
from vflpriv.config.schema import ModelConfig
from vflpriv.data.base import PartySpec
from vflpriv.engine import FINETUNE, Inbox
from vflpriv.models.allocator import reuse_freed_memory
from vflpriv.models.encoders import build_encoder
from vflpriv.models.ssl import augment_image

AUDIT = {"epochs": 20, "iterations": 12, "ema_warmup": True, "lr": 1e-2, "temperature": 0.5}


def digits_view(seed: int) -> AdversaryView:
    g = torch.Generator().manual_seed(seed)
    spec = PartySpec("image", (1, 8, 4))
    local = torch.rand(1437, 1, 8, 4, generator=g)
    y = torch.randint(10, (80,), generator=g)
    encoder = build_encoder(spec, ModelConfig(hidden=128, out_dim=128), generator=g)  # splitnn's audit bottom
    return AdversaryView(
        party=1, phase=FINETUNE, num_classes=10, spec=spec, encoder=encoder,
        local_x=local, aux_x=local[:80], aux_y=y, aux_ids=torch.arange(80), targets={"test": local[:360]},
        target_ids={}, inbox=Inbox(owner=1), generator=torch.Generator().manual_seed(seed + 1),
        device=torch.device("cpu"))


def previous_step():
    """The step before issue 49's change: an ``augment_image`` call per batch, decay and EMA tensor by tensor."""
    def per_batch(view, *, rate):
        return lambda xs, g: [augment_image(x, generator=g, crop_scale=(0.8, 1.0), flip=False) for x in xs]

    return mock.patch.multiple(mixmatch, _batch_augmenter=per_batch, flat_ema=lambda online, target: None)


def affine_grid(scale_x, shift_x, scale_y, shift_y, *, h: int, w: int) -> torch.Tensor:
    """The crops' grid before: a theta per sample and ``F.affine_grid``."""
    theta = torch.zeros(scale_x.shape[0], 2, 3, dtype=scale_x.dtype, device=scale_x.device)
    theta[:, 0, 0], theta[:, 0, 2], theta[:, 1, 1], theta[:, 1, 2] = scale_x, shift_x, scale_y, shift_y
    return F.affine_grid(theta, [scale_x.shape[0], 1, h, w], align_corners=False)


#: What "before" restores, by ``--change``.
BEFORE = {"step": previous_step, "grid": lambda: mock.patch.object(augment, "box_grid", affine_grid)}


def mixmatch_run(seed: int, before) -> tuple[float, torch.Tensor]:
    attack = mixmatch.MixMatchCompletion(mixmatch.MixMatchOptions(**AUDIT))
    view = digits_view(seed)
    with before() if before else contextlib.nullcontext():
        start = time.process_time()
        out = attack.infer(view)["test"]
        return time.process_time() - start, out.confidence


def tuned_run(seed: int, before) -> tuple[float, torch.Tensor]:
    """The audit's tuned mc-mixmatch: successive halving over its 8 candidates, then the winner's refit."""
    attack = mixmatch.MixMatchCompletion(mixmatch.MixMatchOptions(**mixmatch.MixMatchCompletion.audit_options))
    view = digits_view(seed)
    with before() if before else contextlib.nullcontext():
        start = time.process_time()
        found = search(attack, view, budget=8, seed=seed)
        seconds = time.process_time() - start
    trials = [t.inferences["test"].predictions for t in found.trials]
    return seconds, torch.cat([found.inferences["test"].confidence, *trials])


def augment_run(seed: int, before) -> tuple[float, torch.Tensor]:
    """1000 of a MixMatch step's augmentations alone (its 64 labeled rows and 2 x 64 unlabeled, one resampling)."""
    local = digits_view(seed).local_x
    g = torch.Generator().manual_seed(seed)
    batches = [local[:64], local[64:128], local[64:128]]
    with before() if before else contextlib.nullcontext():
        start = time.process_time()
        outs = [augment.augment_images(batches, generator=g, crop_scale=(0.8, 1.0), flip=False)[0] for _ in range(1000)]
        return time.process_time() - start, torch.cat(outs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--change", choices=sorted(BEFORE), default="step", help="what 'before' restores")
    args = parser.parse_args()
    torch.set_num_threads(1)
    reuse_freed_memory()  # as in a training process
    runs = [("mc-mixmatch completion, 240 steps", mixmatch_run)]
    if args.change == "grid":
        runs += [("1000 MixMatch steps' augmentations alone", augment_run),
                 ("tuned mc-mixmatch (search and refit, 456 steps)", tuned_run)]
    for name, fn in runs:
        times: dict[bool, list[float]] = {True: [], False: []}
        same = True
        for r in range(args.repeats + 1):  # the first round warms up
            results = {}
            for before in ((True, False) if r % 2 == 0 else (False, True)):
                results[before] = fn(r, BEFORE[args.change] if before else None)
                if r:
                    times[before].append(results[before][0])
            same &= torch.equal(results[True][1], results[False][1])
        b, a = statistics.median(times[True]), statistics.median(times[False])
        print(f"{name}: before {b:.3f} CPU s, after {a:.3f} CPU s: **{a / b:.2f}x** (repeats before "
              f"{', '.join(f'{t:.3f}' for t in times[True])}; after {', '.join(f'{t:.3f}' for t in times[False])}); "
              f"same numbers bit for bit: {same}")


if __name__ == "__main__":
    main()
