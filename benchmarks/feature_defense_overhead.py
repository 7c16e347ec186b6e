"""What a feature defense adds to the training it protects, as ratios measured in one process (issue 47's bound: at most
1.5x, attacker-aware training with its imagined decoder at most 2x).

Finetuning: splitnn's whole training (federation, finetuning, test prediction) with each feature defense at the middle
of its default strengths, against the undefended training. Pretraining: local-simsiam's and fedhssl's pretraining
(``Method.pretrain``, no cache) with nopeek and fi-adversarial in it, against the undefended pretraining. Runs are
interleaved (undefended, then each defense, repeated), one intra-op thread as the runner trains, after a warm-up;
prints per case the median over repetitions of defended seconds / undefended seconds of the same repetition.

    python benchmarks/feature_defense_overhead.py [--dataset digits] [--repeats 5] [--image]

``--image``: Fashion-MNIST halves (1500 rows, the CNN bottom) instead, finetuning only: a bottom large next to the
defenses' own networks, where digits' (a 32 -> 128 -> 128 MLP) is small next to them.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from vflpriv.config.registry import DEFENSES
from vflpriv.config.schema import RunConfig
from vflpriv.runner.execution import build_federation, train
from vflpriv.runner.planning import plan

FINETUNE = ["nopeek", "mid-sender", "fi-adversarial", "embedding-dp"]
PRETRAIN = ["nopeek", "fi-adversarial"]
BOUND = {"fi-adversarial": 2.0}


def _middle(name: str, phase: str) -> float:
    strengths = DEFENSES.get(name).default_strengths(phase)
    return strengths[len(strengths) // 2]


def _config(base: dict, method: str, defense: str | None, phase: str) -> RunConfig:
    defenses = [] if defense is None else [{"name": defense, "strength": _middle(defense, phase), "phase": phase}]
    options = {"epochs": 2} if method.startswith("local-") else {"global_iterations": 2} if method != "splitnn" else {}
    return RunConfig.model_validate({**base, "method": {"name": method, "options": options}, "defenses": defenses,
                                     "attack": {"name": "fi-decoder"}})


def _finetune_seconds(config: RunConfig) -> float:
    p = plan(config)  # planning (the dataset's load, the checks) is not the training's time
    start = time.perf_counter()
    train(p)
    return time.perf_counter() - start


def _pretrain_seconds(config: RunConfig) -> float:
    p = plan(config)
    fed = build_federation(p)
    start = time.perf_counter()
    p.method.pretrain(fed)
    return time.perf_counter() - start


def measure(base: dict, repeats: int, *, pretraining: bool = True) -> list[tuple[str, float, float]]:
    """(case, median ratio, median undefended seconds) per case."""
    cases = [(f"finetune {d}", "splitnn", d, "finetune", _finetune_seconds) for d in FINETUNE]
    cases += [(f"pretrain {m} {d}", m, d, "pretrain", _pretrain_seconds) for m in ("local-simsiam", "fedhssl")
              for d in PRETRAIN] if pretraining else []
    baselines = {(m, ph): (_config(base, m, None, ph), fn) for _, m, _, ph, fn in cases}
    for config, fn in baselines.values():  # warm-up: imports, allocator, first-call costs
        fn(config)
    ratios: dict[str, list[float]] = {c[0]: [] for c in cases}
    seconds: dict[str, list[float]] = {c[0]: [] for c in cases}
    for _ in range(repeats):
        undefended = {key: fn(config) for key, (config, fn) in baselines.items()}
        for name, method, defense, phase, fn in cases:
            defended = fn(_config(base, method, defense, phase))
            ratios[name].append(defended / undefended[(method, phase)])
            seconds[name].append(undefended[(method, phase)])
    return [(name, statistics.median(ratios[name]), statistics.median(seconds[name])) for name, *_ in cases]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--image", action="store_true", help="Fashion-MNIST halves, 1500 rows, CNN bottom, finetuning")
    args = parser.parse_args()
    torch.set_num_threads(1)
    base = {"dataset": {"name": args.dataset}}
    if args.image:
        base = {"dataset": {"name": "fashion-mnist", "max_samples": 1500}, "model": {"encoder": "cnn"}}
    print(f"{base['dataset']['name']}: defended / undefended training seconds, median of {args.repeats} interleaved "
          "repetitions")
    print("| case | ratio | bound | undefended s |")
    print("|---|---|---|---|")
    for name, ratio, undefended in measure(base, args.repeats, pretraining=not args.image):
        bound = BOUND.get(name.split()[-1], 1.5)
        print(f"| {name} | {ratio:.2f}x | {bound:g}x{'' if ratio <= bound else ' (over)'} | {undefended:.2f} |")


if __name__ == "__main__":
    main()
