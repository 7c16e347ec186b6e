"""fi-inversion's stopping rule measured: the default (``stop: last``, 200 steps from the fi-decoder's guess, surrogate
100 epochs) against ``stop: held-out`` (the step chosen on a quarter of the known samples inverted beside the targets,
decoder and surrogate fitted on the rest), with the fi-decoder alone as the reference, on splitnn's finetuning
embeddings (the active party attacks passive party 1's features), default settings otherwise.

Prints, per dataset and rule, the test targets' MSE (features scaled to [0, 1]) as mean +- std over the seeds, and the
per-seed values.

    python benchmarks/inversion_stop.py [--datasets digits breast-cancer] [--seeds 0 1 2]
"""

from __future__ import annotations

import argparse
import statistics

from vflpriv.config.schema import RunConfig
from vflpriv.runner.execution import run

RULES = {"fi-decoder": {"name": "fi-decoder"},
         "fi-inversion, stop last (default)": {"name": "fi-inversion"},
         "fi-inversion, stop held-out": {"name": "fi-inversion", "options": {"stop": "held-out"}}}


def measure(dataset: str, seed: int, attack: dict) -> float:
    """The test targets' MSE of one run."""
    config = RunConfig.model_validate({"dataset": {"name": dataset}, "seed": seed, "method": {"name": "splitnn"},
                                       "attack": attack})
    (record,) = run(config)
    if record.status != "ok":
        raise SystemExit(f"{dataset} seed {seed} {attack}: {record.status}: {record.error}")
    return record.feature_mse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["digits", "breast-cancer"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    args = parser.parse_args()
    print("| dataset | attack | test MSE, mean +- std | per seed |")
    print("| --- | --- | --- | --- |")
    for dataset in args.datasets:
        for label, attack in RULES.items():
            mses = [measure(dataset, seed, attack) for seed in args.seeds]
            spread = statistics.stdev(mses) if len(mses) > 1 else 0.0
            print(f"| {dataset} | {label} | {statistics.mean(mses):.4f} +- {spread:.4f} | "
                  f"{', '.join(f'{m:.4f}' for m in mses)} |", flush=True)


if __name__ == "__main__":
    main()
