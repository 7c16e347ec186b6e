"""Does a cheaper fi-decoder recipe than VFLAIR's (Adam lr 1e-3, 50 epochs, batch 32) reach the same reconstruction
error on the default dataset (splitnn on digits, the active party against party 1)?

Per recipe (epochs, lr) and seed, one ``evaluate``-path run; prints the test targets' MSE (mean ± std over seeds,
population std) and the median attack / training time ratio. On digits the 29 known samples are one batch, so an
epoch is one Adam step and the epochs are the decoder's whole cost.

    python benchmarks/decoder_recipe.py [--seeds 0,1,2,3,4]
"""

from __future__ import annotations

import argparse
import statistics

import torch

from vflpriv.config.schema import RunConfig
from vflpriv.runner.execution import run

#: (epochs, lr): VFLAIR's first, then cheaper ones with a larger step, and a dearer one.
RECIPES = ((50, 1e-3), (25, 1e-3), (25, 2e-3), (17, 3e-3), (10, 5e-3), (100, 1e-3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2,3,4")
    args = parser.parse_args()
    torch.set_num_threads(1)
    seeds = [int(s) for s in args.seeds.split(",")]
    print("| epochs | lr | test MSE | attack / training |\n| --- | --- | --- | --- |")
    for epochs, lr in RECIPES:
        runs = [RunConfig.model_validate({"seed": s, "attack": {"name": "fi-decoder",
                                                                "options": {"epochs": epochs, "lr": lr}}})
                for s in seeds]
        records = [r for cfg in runs for r in run([cfg])]
        assert all(r.status == "ok" for r in records), [r.error for r in records]
        mse = [r.feature_mse for r in records]
        ratio = statistics.median(r.attack_seconds / r.train_seconds for r in records)
        print(f"| {epochs} | {lr:g} | {statistics.mean(mse):.4f} ± {statistics.pstdev(mse):.4f} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
