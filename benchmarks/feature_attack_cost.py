"""What a feature attack adds to its training, on the default dataset (splitnn on digits), in one process.

For each seed, one training with every feature attack on it (fi-decoder at VFLAIR's recipe, grn and fi-inversion at
the audit's options, untuned and tuned as the audit runs them); the records' own clocks give the training's seconds
and each attack's (the feature prior, computed once per training and shared, is in the first attack's). Seeds run
one after another, so every attack and the training are measured on the same machine minutes apart; a warm-up run
pays the one-off costs (imports). Prints, per attack, the median over seeds of attack seconds / training seconds (the
issue's bound: at most 0.5 on the default dataset).

    python benchmarks/feature_attack_cost.py [--seeds 0,1,2,3,4]
"""

from __future__ import annotations

import argparse
import statistics

import torch

from vflpriv.attacks.features.grn import GenerativeRegression
from vflpriv.attacks.features.inversion import FeatureInversion
from vflpriv.config.schema import RunConfig
from vflpriv.runner import feature_prior
from vflpriv.runner.execution import run

ATTACKS = {"fi-decoder": {}, "grn": GenerativeRegression.audit_options,
           "fi-inversion": FeatureInversion.audit_options}


def configs(seed: int, *, tune: bool) -> list[RunConfig]:
    return [RunConfig.model_validate({"seed": seed, "attack": {"name": name, "options": options, "tune": tune}})
            for name, options in ATTACKS.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2,3,4")
    args = parser.parse_args()
    torch.set_num_threads(1)
    seeds = [int(s) for s in args.seeds.split(",")]
    run(configs(99, tune=False))  # warm-up
    ratios: dict[str, list[float]] = {}
    trainings = []
    for seed in seeds:
        for tune in (False, True):
            feature_prior._PRIORS.clear()  # the prior is paid by the first attack of each training
            records = run(configs(seed, tune=tune))
            assert all(r.status == "ok" for r in records), [r.error for r in records]
            trainings.append(records[0].train_seconds)
            for r in records:
                ratios.setdefault(f"{r.attack}{' (tuned)' if tune else ''}", []).append(
                    r.attack_seconds / r.train_seconds)
    print(f"splitnn on digits, seeds {args.seeds}, 1 torch thread; training {statistics.median(trainings):.2f} s "
          "(median)")
    for name, values in ratios.items():
        print(f"{name:24s} attack / training: median {statistics.median(values):.2f} "
              f"(min {min(values):.2f}, max {max(values):.2f})")


if __name__ == "__main__":
    main()
