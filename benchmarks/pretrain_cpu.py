"""FedHSSL-SimSiam's pretraining at the README's main command settings, before and after issue 49's same-numbers
changes, interleaved in one process; and its profile.

The work is the main command's first training's (digits, seed 0, ``vflpriv evaluate --method fedhssl --attack mc
--defense iso``): ``FedHSSL.pretrain`` (4 global iterations: 24 cross-party steps and 96 guided local steps), then
an encoder as the adversary's prior pretrains it (plain SimSiam alone on party 1's 1437 samples, 4 epochs: 48
steps; the same work, from a seed of its own). Each repeat
runs both once before and once after (alternating which goes first; the first repeat warms up), on one thread,
process CPU seconds, medians; and checks that both give the same numbers bit for bit (every pretrained tensor,
parameters and BatchNorm statistics, and the loss history). "Before" restores the previous code by patching:

- the two views of a local SSL batch made by two ``augment_image`` calls and concatenated (now one resampling of
  both, ``stacked_views``);

    python benchmarks/pretrain_cpu.py [--repeats 5]
    python benchmarks/pretrain_cpu.py --profile [--before]   # cProfile and torch.profiler of one pretraining
    python benchmarks/pretrain_cpu.py --parts          # CPU microseconds of each part of one guided local step

Prints the medians, the ratio after / before and whether the numbers are the same.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import pstats
import statistics
import time
from unittest import mock

import torch

import vflpriv.methods.pretraining as pretraining
from vflpriv.cli.evaluate import build_experiment
from vflpriv.methods.local_ssl import LocalOptions, _train_local
from vflpriv.models.allocator import reuse_freed_memory
from vflpriv.models.ssl import two_views
from vflpriv.runner.execution import build_federation
from vflpriv.runner.planning import plan

MAIN = dict(config=None, method="fedhssl", attack="mc", defense="iso", dataset=None, strengths=None, seeds=None,
            phase=None, jobs=None, backend=None, device=None, overrides=[])


def previous_code():
    """The code before this session's changes, restored by patching."""

    def two_calls(x, augment, *, clean_first=False, generator):
        return torch.cat(two_views(x, augment, clean_first=clean_first, generator=generator))

    return mock.patch.multiple(pretraining, stacked_views=two_calls)


def main_training():
    return build_experiment(**MAIN).runs()[0]


def pretrain_both(run) -> tuple[float, list[torch.Tensor]]:
    """(CPU seconds, every number): FedHSSL's pretraining, then the prior's encoder on party 1's local samples."""
    p = plan(run)
    fed = build_federation(p)
    party = fed.parties[run.partition.adversary]
    start = time.process_time()
    encoders = p.method.pretrain(fed)
    prior, _ = _train_local(party.spec, party.x_train, party.local_ids, flavour="simsiam", model_config=run.model,
                            options=LocalOptions(epochs=p.method.options.ssl_epochs()), seed=run.seed,
                            stream="local-ssl", device=fed.device)
    seconds = time.process_time() - start
    numbers = [t.detach().clone() for m in [*encoders, prior] for t in m.state_dict().values()]
    numbers.append(torch.tensor([v for row in p.method.history for values in row.values() for v in values]))
    return seconds, numbers


def compare(run, repeats: int) -> None:
    times: dict[bool, list[float]] = {True: [], False: []}
    same = True
    for r in range(repeats + 1):  # the first round warms up
        results = {}
        for before in ((True, False) if r % 2 == 0 else (False, True)):
            with previous_code() if before else contextlib.nullcontext():
                results[before] = pretrain_both(run)
            if r:
                times[before].append(results[before][0])
        same &= len(results[True][1]) == len(results[False][1]) and all(
            torch.equal(a, b) for a, b in zip(results[True][1], results[False][1]))
    b, a = statistics.median(times[True]), statistics.median(times[False])
    print(f"FedHSSL-SimSiam pretraining + the prior's encoder (main command, seed 0), {torch.get_num_threads()} "
          f"thread: before {b:.3f} CPU s, after {a:.3f} CPU s: **{a / b:.2f}x** (before "
          f"{', '.join(f'{t:.3f}' for t in times[True])}; after {', '.join(f'{t:.3f}' for t in times[False])}); "
          f"same numbers bit for bit: {same}")


def profile(run, before: bool) -> None:
    """cProfile (Python calls) and torch.profiler (operators) of FedHSSL's pretraining alone, after a warm-up, with the
    previous code (``before``) or this one."""

    def fresh():
        p = plan(run)
        return p.method, build_federation(p)

    with previous_code() if before else contextlib.nullcontext():
        _profiled(fresh)


def _profiled(fresh) -> None:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    method, fed = fresh()
    method.pretrain(fed)
    method, fed = fresh()
    start = time.process_time()
    method.pretrain(fed)
    print(f"one pretraining, unprofiled: {time.process_time() - start:.3f} CPU s")
    method, fed = fresh()
    prof = cProfile.Profile()
    prof.enable()
    method.pretrain(fed)
    prof.disable()
    stats = pstats.Stats(prof)
    print(f"Python calls: {stats.total_calls} ({stats.prim_calls} primitive)")
    stats.sort_stats("tottime").print_stats(25)
    method, fed = fresh()
    with torch_profile(activities=[ProfilerActivity.CPU]) as ops:
        method.pretrain(fed)
    table = ops.key_averages()
    print(f"operators: {sum(e.count for e in table if e.key.startswith('aten::'))} aten calls")
    print(table.table(sort_by="self_cpu_time_total", row_limit=30))


def parts(run, repeats: int = 300) -> None:
    """Each part of one guided local SSL step of party 0 (FedHSSL's step 2: its first batch of 128 rows, 256 with both
    views) and of one cross-party step, timed alone ``repeats`` times (process CPU microseconds, median of 5 rounds).
    The parts run on the same modules over and over, so the weights drift; the times do not depend on them."""
    from torch import nn

    from vflpriv.methods.fedhssl import cross_loss
    from vflpriv.methods.pretraining import LocalSSL, make_pretrain_optimizer
    from vflpriv.models.ssl import negative_cosine, stacked_views, symmetrized

    p = plan(run)
    fed = build_federation(p)
    method, opts, party = p.method, p.method.options, fed.parties[0]
    cross, local = method._towers(fed, run.seed)
    state = LocalSSL.create("simsiam", opts, local[0], party.x_train[party.local_ids], party.spec, seed=run.seed,
                            stream="pretrain:local:0", device=fed.device)
    tower, c, x = state.tower, cross[0], party.x_train[party.local_ids[:opts.batch_size]]
    params = [q for q in tower.parameters() if q.requires_grad]
    n = x.shape[0]
    views = stacked_views(x, state.augment, generator=state.aug_generator)

    def loss_of(h_z_p, guide):
        _, z, pred = h_z_p
        loss = symmetrized(negative_cosine, pred[:n], z[n:], pred[n:], z[:n])
        return loss + opts.gamma * (negative_cosine(pred[:n], guide[:n]) + negative_cosine(pred[n:], guide[n:]))

    def guidance():
        with torch.no_grad():
            return c.project(views)

    guide = guidance()

    def backward():
        state.optimizer.zero_grad(set_to_none=True)
        loss_of(tower.stages(views), guide).backward()

    backward()
    cross_opt = make_pretrain_optimizer(cross[0], opts)
    aligned = [q.x_train[fed.aligned[:opts.batch_size]] for q in fed.parties]
    received = cross[1].stages(aligned[1])[1].detach()

    def cross_step():
        _, _, pred = cross[0].stages(aligned[0])
        cross_opt.zero_grad(set_to_none=True)
        cross_loss("simsiam", opts)(pred, received).backward()
        cross_opt.step()

    steps = {
        "two views, two resamplings (before)": lambda: torch.cat(two_views(x, state.augment, generator=state.aug_generator)),
        "two views, one resampling (after)": lambda: stacked_views(x, state.augment, generator=state.aug_generator),
        "online tower forward (f_l, g_l, h_l; 256 rows)": lambda: tower.stages(views),
        "guidance target (cross g_c(f_c), no grad, train mode)": guidance,
        "forward + Eq. 6 loss": lambda: loss_of(tower.stages(views), guide),
        "forward + loss + backward": backward,
        "gradient clipping (norm 5)": lambda: nn.utils.clip_grad_norm_(params, opts.grad_clip, foreach=True),
        "optimizer step (fused SGD, 2 groups)": state.optimizer.step,
        "a cross-party step of the active party (forward, loss, backward, step; 128 rows)": cross_step,
        "PMA (both parties' shared modules up and down the channel)": lambda: method._aggregate(fed, [state, state], 0),
    }
    tower.train()
    c.train()
    for name, fn in steps.items():
        rounds = []
        for _ in range(6):
            start = time.process_time()
            for _ in range(repeats):
                fn()
            rounds.append((time.process_time() - start) / repeats * 1e6)
        print(f"{name}: {statistics.median(rounds[1:]):.0f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="profile one pretraining instead of comparing")
    parser.add_argument("--before", action="store_true", help="profile the previous code (with --profile)")
    parser.add_argument("--parts", action="store_true", help="time each part of one local step instead of comparing")
    args = parser.parse_args()
    torch.set_num_threads(1)
    reuse_freed_memory()  # as in a training process
    run = main_training()
    if args.profile:
        profile(run, args.before)
    elif args.parts:
        parts(run)
    else:
        compare(run, args.repeats)


if __name__ == "__main__":
    main()
