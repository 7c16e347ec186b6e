"""What a feature attack adds to its training, on the default dataset (splitnn on digits; ``--method`` another), in one process.

For each seed, one training with every feature attack on it (fi-decoder at VFLAIR's recipe, grn and fi-inversion at
the audit's options, untuned and tuned as the audit runs them); the records' own clocks give the training's seconds
and each attack's (the feature prior, computed once per training and shared, is in the first attack's; fi-inversion
starts from fi-decoder's decoder, trained once per training: ``attacks/features/shared_fits.py``). A second training
per seed runs fi-inversion alone, paying for its own decoder. Seeds run one after another, so every attack and the
training are measured on the same machine minutes apart; a warm-up run pays the one-off costs (imports). Prints, per
attack, the median over seeds of attack seconds / training seconds (the issue's bound: at most 0.5 on the default
dataset), on the records' wall clocks and on CPU clocks (``time.process_time`` around the runner's training and
each attack: steadier where other processes share the cores), then the floating-point operations of one seed's
training and attacks (torch's FlopCounterMode: matrix products and convolutions; a count no other process on the
machine can move). ``--untuned`` leaves out the tuned attacks (a quicker A/B).

    python benchmarks/feature_attack_cost.py [--seeds 0,1,2,3,4] [--untuned] [--method fedhssl]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from vflpriv.attacks.features import shared_fits
from vflpriv.attacks.features.grn import GenerativeRegression
from vflpriv.attacks.features.inversion import FeatureInversion
from vflpriv.config.schema import RunConfig
from vflpriv.runner import execution, feature_prior
from vflpriv.runner.execution import run
from vflpriv.store import cache

ATTACKS = {"fi-decoder": {}, "grn": GenerativeRegression.audit_options,
           "fi-inversion": FeatureInversion.audit_options}


METHOD = {"name": "splitnn"}


def configs(seed: int, *, tune: bool, only: str | None = None) -> list[RunConfig]:
    return [RunConfig.model_validate({"seed": seed, "method": METHOD,
                                      "attack": {"name": name, "options": options, "tune": tune}})
            for name, options in ATTACKS.items() if only in (None, name)]


def fresh_run(runs: list[RunConfig]):
    """The runs with no prior, fit or pretraining of an earlier training to reuse (an empty cache of their own: a
    pretraining method's training pays for its pretraining, as in a cold audit)."""
    os.environ[cache.ENV_VAR] = tempfile.mkdtemp(prefix="feature-attack-cost-")
    feature_prior._PRIORS.clear()
    shared_fits._FITS.clear()
    records = run(runs)
    assert all(r.status == "ok" for r in records), [r.error for r in records]
    return records


def flops(seed: int, *, tune: bool, only: str | None = None) -> dict[str, float]:
    """GFLOP of one training and of each attack on it, counted around the runner's training and feature attacks."""
    counted: dict[str, float] = {}
    train, attack = execution.train, execution.RUNS["features"]

    def counting(name, fn):
        def wrapper(*args, **kwargs):
            with FlopCounterMode(display=False) as counter:
                out = fn(*args, **kwargs)
            counted[name(args)] = counter.get_total_flops() / 1e9
            return out
        return wrapper

    execution.train = counting(lambda args: "training", train)
    execution.RUNS["features"] = counting(lambda args: args[0].config.attack.name, attack)
    try:
        fresh_run(configs(seed, tune=tune, only=only))
    finally:
        execution.train, execution.RUNS["features"] = train, attack
    return counted


CPU: dict[str, float] = {}


def cpu_clocked() -> None:
    """Put CPU clocks around the runner's training and feature attacks (seconds in :data:`CPU`, by attack name)."""
    def clocked(fn, name):
        def wrapper(*args, **kwargs):
            start = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                CPU[name(args)] = time.process_time() - start
        return wrapper

    execution.train = clocked(execution.train, lambda args: "training")
    execution.RUNS["features"] = clocked(execution.RUNS["features"], lambda args: args[0].config.attack.name)


def summary(name: str, values: list[float]) -> str:
    return f"{name:28s} median {statistics.median(values):.2f} (min {min(values):.2f}, max {max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--untuned", action="store_true", help="leave out the tuned attacks")
    parser.add_argument("--method", default="splitnn", help="the VFL method trained (the audit's default: splitnn)")
    args = parser.parse_args()
    METHOD["name"] = args.method
    torch.set_num_threads(1)
    seeds = [int(s) for s in args.seeds.split(",")]
    run(configs(99, tune=False))  # warm-up
    ratios: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    trainings, cpu_trainings = [], []
    tunes = (False,) if args.untuned else (False, True)
    flops_unclocked = execution.train, execution.RUNS["features"]
    cpu_clocked()
    for seed in seeds:
        for tune in tunes:
            tuned = " (tuned)" if tune else ""
            records = fresh_run(configs(seed, tune=tune))
            trainings.append(records[0].train_seconds)
            cpu_trainings.append(CPU["training"])
            for r in records:
                ratios.setdefault(f"{r.attack}{tuned}", []).append(r.attack_seconds / r.train_seconds)
                cpu.setdefault(f"{r.attack}{tuned}", []).append(CPU[r.attack] / CPU["training"])
            (alone,) = fresh_run(configs(seed, tune=tune, only="fi-inversion"))
            ratios.setdefault(f"fi-inversion alone{tuned}", []).append(alone.attack_seconds / alone.train_seconds)
            cpu.setdefault(f"fi-inversion alone{tuned}", []).append(CPU["fi-inversion"] / CPU["training"])
    execution.train, execution.RUNS["features"] = flops_unclocked
    print(f"{args.method} on digits, seeds {args.seeds}, 1 torch thread; training {statistics.median(trainings):.3f} s wall, "
          f"{statistics.median(cpu_trainings):.3f} CPU s (median)")
    print("attack / training, wall clocks (the records'):")
    for name, values in ratios.items():
        print("  " + summary(name, values))
    print("attack / training, CPU clocks:")
    for name, values in cpu.items():
        print("  " + summary(name, values))
    for tune in tunes:
        counted = flops(seeds[0], tune=tune)
        counted["fi-inversion alone"] = flops(seeds[0], tune=tune, only="fi-inversion")["fi-inversion"]
        training = counted.pop("training")
        print(f"GFLOP, seed {seeds[0]}{' (tuned)' if tune else ''}: training {training:.2f}; " + "; ".join(
            f"{name} {value:.2f} ({value / training:.2f} x)" for name, value in counted.items()))


if __name__ == "__main__":
    main()
