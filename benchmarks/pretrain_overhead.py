"""Overhead of vflpriv's FedHSSL pretraining over a bare PyTorch loop doing the same work.

Times one FedHSSL-SimSiam global iteration (step 1 cross-party SSL through the channel, step 2 guided
local SSL, step 3 PMA through the channel to the server) against a hand-written loop that trains the
same towers (same architecture and initial weights) on the same batches and the same views, passing
tensors between parties directly (no channel, meter, messages or method classes). Both are timed
``--repeats`` times, alternating, and the minimum of each is compared.

    python benchmarks/pretrain_overhead.py [--dataset digits] [--repeats 5] [--iterations 1]

Prints the two times and ``ratio: X.XX`` (vflpriv / bare; 1.00 = no overhead).
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

from vflpriv.common.seeding import generator as seeded_generator
from vflpriv.config.schema import RunConfig
from vflpriv.engine import Federation
from vflpriv.methods.pretraining import make_pretrain_optimizer, party_augmenter
from vflpriv.models.ssl import negative_cosine, symmetrized, two_views
from vflpriv.models.training import index_batches, set_cosine_lr
from vflpriv.runner.execution import build_federation
from vflpriv.runner.planning import Plan, plan


def federation(config: RunConfig) -> tuple[Plan, Federation]:
    p = plan(config)
    return p, build_federation(p)


def bare_fedhssl(fed: Federation, method, iterations: int) -> None:
    """FedHSSL-SimSiam written directly in PyTorch: same towers, batches and views as ``method.pretrain``."""
    opts = method.options
    seed = fed.generator.initial_seed()
    cross, local = method._towers(fed, seed)
    cross_opt = [make_pretrain_optimizer(t, opts) for t in cross]
    local_opt = [make_pretrain_optimizer(t, opts) for t in local]
    augs = [party_augmenter(p.spec, p.x_train[p.local_ids], opts) for p in fed.parties]
    aug_gens = [seeded_generator(seed, f"pretrain:local:{p.index}:views") for p in fed.parties]
    batch_gens = [seeded_generator(seed, f"pretrain:local:{p.index}:batches") for p in fed.parties]
    cross_batches = seeded_generator(seed, "pretrain:cross:batches")
    k = len(fed.parties)
    for it in range(iterations):
        for opt in cross_opt + local_opt:
            set_cosine_lr(opt, it, iterations)
        for t in cross:
            t.train()
        for batch in index_batches(fed.aligned, batch_size=opts.batch_size, generator=cross_batches):
            outs = [t(p.x_train[batch]) for t, p in zip(cross, fed.parties)]
            z = [o[0].detach() for o in outs]
            for i in range(k):
                pred = outs[i][1]
                if i == 0:
                    loss = torch.stack([negative_cosine(pred, z[j]) for j in range(1, k)]).mean()
                else:
                    loss = negative_cosine(pred, z[0])
                cross_opt[i].zero_grad(set_to_none=True)
                loss.backward()
                cross_opt[i].step()
        for i, p in enumerate(fed.parties):
            tower, c = local[i], cross[i]
            tower.train()
            c.eval()
            params = [q for q in tower.parameters() if q.requires_grad]
            for batch in index_batches(p.local_ids, batch_size=opts.batch_size, generator=batch_gens[i]):
                v1, v2 = two_views(p.x_train[batch], augs[i], clean_first=opts.clean_view, generator=aug_gens[i])
                n = v1.shape[0]
                views = torch.cat([v1, v2])
                zz, pp = tower(views)
                loss = symmetrized(negative_cosine, pp[:n], zz[n:], pp[n:], zz[:n])
                with torch.no_grad():
                    cz = c.project(views)
                loss = loss + opts.gamma * (negative_cosine(pp[:n], cz[:n]) + negative_cosine(pp[n:], cz[n:]))
                local_opt[i].zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(params, opts.grad_clip, foreach=True)
                local_opt[i].step()
            c.train()
        shared = [nn.ModuleList([t.encoder.top, t.projector, t.predictor]) for t in local]
        states = [{n: v for n, v in s.state_dict().items() if v.is_floating_point()} for s in shared]
        avg = {n: torch.stack([s[n] for s in states]).mean(0) for n in states[0]}
        with torch.no_grad():
            for s in shared:
                for n, v in s.state_dict().items():
                    if v.is_floating_point():
                        v.copy_(avg[n])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=1, help="global iterations per timing")
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    config = RunConfig.model_validate({
        "dataset": {"name": args.dataset},
        "method": {"name": "fedhssl", "options": {"global_iterations": args.iterations}},
    })
    ours, bare = [], []
    for r in range(args.repeats + 1):  # the first round warms up (oneDNN primitives, allocator)
        plan, fed = federation(config)
        t = time.perf_counter()
        plan.method.pretrain(fed)
        t_ours = time.perf_counter() - t
        plan, fed = federation(config)
        t = time.perf_counter()
        bare_fedhssl(fed, plan.method, args.iterations)
        t_bare = time.perf_counter() - t
        if r:
            ours.append(t_ours)
            bare.append(t_bare)
    o, b = min(ours), min(bare)
    print(f"dataset {args.dataset}, {args.iterations} FedHSSL-SimSiam global iteration(s), "
          f"{torch.get_num_threads()} threads, min of {args.repeats}")
    print(f"vflpriv: {o:.3f} s   bare PyTorch loop: {b:.3f} s")
    print(f"ratio: {o / b:.2f}")


if __name__ == "__main__":
    main()
