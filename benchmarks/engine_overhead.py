"""Engine overhead: FedSplitNN finetuning through the channel vs a bare PyTorch loop.

Both train the same network (the parties' encoders side by side + the active party's Linear head)
from the same initial weights on the same index batches. The bare loop is one module, one optimizer,
one backward; the engine sends embeddings up and gradients down through the channel (detach,
meter, defense routing, inbox) and keeps one optimizer per party. Timings are interleaved and the
median of several repeats is compared, all in one process, since these machines are noisy.

    python benchmarks/engine_overhead.py [--epochs 20] [--repeats 5]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch
from torch import nn

from vflpriv.common.seeding import generator
from vflpriv.config.schema import RunConfig
from vflpriv.data.load import load_dataset
from vflpriv.data.scenario import build_scenario
from vflpriv.engine import Channel, Federation, Inbox, make_parties
from vflpriv.methods.finetune import finetune, new_top
from vflpriv.models.encoders import build_encoder
from vflpriv.models.training import index_batches, make_optimizer


def federation(cfg: RunConfig) -> Federation:
    ds = load_dataset(cfg.dataset, parties=cfg.partition.parties)
    sc = build_scenario(ds, cfg.partition, seed=0)
    dev = torch.device("cpu")
    return Federation(make_parties(sc, dev), sc.aligned, Channel([], Inbox(owner=1)), ds.num_classes,
                      cfg.model, cfg.finetune, generator(0, "method"), dev)


def engine_time(fed: Federation, bottoms, top) -> float:
    fed.generator.manual_seed(1)
    start = time.perf_counter()
    finetune(fed, bottoms, top)
    return time.perf_counter() - start


def bare_time(fed: Federation, bottoms, top) -> float:
    """The same computation written as one PyTorch model: no parties, no channel."""
    xs = [p.x_train for p in fed.parties]
    labels, ids = fed.active.labels, fed.active.label_ids
    params = [p for m in (*bottoms, top) for p in m.parameters()]
    cfg = fed.finetune
    opt = make_optimizer(params, name=cfg.optimizer, lr=cfg.lr, weight_decay=cfg.weight_decay)
    g = torch.Generator().manual_seed(1)
    for m in (*bottoms, top):
        m.train()
    start = time.perf_counter()
    for _ in range(cfg.epochs):
        for batch in index_batches(ids, batch_size=cfg.batch_size, generator=g):
            logits = top([b(x[batch]) for b, x in zip(bottoms, xs)])
            loss = nn.functional.cross_entropy(logits, labels[batch])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cfg = RunConfig.model_validate({"finetune": {"epochs": args.epochs}})
    fed = federation(cfg)
    init = [build_encoder(p.spec, fed.model, generator=fed.generator) for p in fed.parties]
    init_top = new_top(fed, init)
    engine, bare = [], []
    for _ in range(args.repeats):
        engine.append(engine_time(fed, copy.deepcopy(init), copy.deepcopy(init_top)))
        bare.append(bare_time(fed, copy.deepcopy(init), copy.deepcopy(init_top)))
    e, b = statistics.median(engine), statistics.median(bare)
    batches = len(index_batches(fed.active.label_ids, batch_size=cfg.finetune.batch_size, generator=None))
    print(f"digits, {len(fed.parties)} parties, {fed.active.label_ids.numel()} labels, "
          f"{args.epochs} epochs x {batches} batches, {args.threads} torch thread(s), {args.repeats} repeats")
    print(f"engine median: {e:.3f} s   bare median: {b:.3f} s")
    print(f"ratio: {e / b:.2f}")


if __name__ == "__main__":
    main()
