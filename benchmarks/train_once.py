"""N attacks on one trained federation vs N separate runs (one training per attack), in one process.

Both variants run the same records (same seed, same configs) from empty caches (no prior, no pretraining
carried over; the separate runs reuse the pretraining of the first, as a sweep's runs do), after a warm-up
run that pays the one-off costs (imports).
Prints both times, the ratio, and the ratio expected if the saving were exactly the N - 1 trainings
(from the measured training and attack times of the train-once records).

    python benchmarks/train_once.py [--method splitnn] [--attacks mc,mc-mixmatch,gc] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import torch

import vflpriv.runner.prior as prior
from vflpriv.config.schema import RunConfig
from vflpriv.runner.execution import run
from vflpriv.store import cache


def configs(method: str, attacks: list[str], seed: int) -> list[RunConfig]:
    return [RunConfig.model_validate({
        "method": {"name": method}, "seed": seed,
        "defenses": [{"name": "iso", "strength": 5.0, "sweep": True}],
        "attack": {"name": name, "options": {"epochs": 10, "iterations": 50} if name == "mc-mixmatch" else {}},
    }) for name in attacks]


def timed(fn) -> tuple[float, object]:
    """Time ``fn`` with empty caches: no prior and no pretraining carried over from another variant."""
    prior._PRIORS.clear()
    prior._ENCODERS.clear()
    with tempfile.TemporaryDirectory() as cold:
        os.environ[cache.ENV_VAR] = cold
        start = time.perf_counter()
        out = fn()
        return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", default="splitnn")
    parser.add_argument("--attacks", default="mc,mc-mixmatch,gc")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    runs = configs(args.method, args.attacks.split(","), args.seed)
    timed(lambda: run(runs))  # warm-up: every attack's imports and first use, the dataset load
    once_time, records = timed(lambda: run(runs))
    separate_time, separate = timed(lambda: [r for c in runs for r in run([c])])
    assert [r.attack_accuracy for r in records] == [r.attack_accuracy for r in separate], "same numbers"
    n, train = len(runs), records[0].train_seconds
    attacks = sum(r.attack_seconds for r in records)
    expected = (n * train + attacks) / (train + attacks)
    print(f"{args.method}, digits, {n} attacks ({args.attacks}), seed {args.seed}, 1 torch thread")
    print(f"one training, {n} attacks: {once_time:.2f} s   {n} separate runs: {separate_time:.2f} s")
    print(f"measured training {train:.2f} s, attacks {attacks:.2f} s in all")
    print(f"ratio: {separate_time / once_time:.2f}  (expected from saving the {n - 1} trainings: {expected:.2f})")


if __name__ == "__main__":
    main()
