"""What refusing a dataset's non-finite features and out-of-range labels at load (``data.base.values_problem``,
review hunt3 P7) costs against the load itself, per dataset that loads here without a download (CPU seconds of this
process, the two interleaved in each repeat), Fashion-MNIST's 70000 x 784 from synthetic files; each must pass.

    python benchmarks/dataset_values_cost.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from data_digest_cost import synthetic

from vflpriv.config.registry import DATASETS
from vflpriv.data.base import values_problem


def _timed(work) -> tuple[object, float]:
    start = time.process_time()
    result = work()
    return result, time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        roots = {"fashion-mnist": synthetic(Path(tmp))}
        print("| dataset | load (s) | check (s) | check / load |\n|---|---|---|---|")
        for name in DATASETS.names():
            loader = DATASETS.get(name)
            loads, checks = [], []
            try:
                for _ in range(args.repeats):
                    dataset, load = _timed(lambda: loader(parties=2, root=roots.get(name), max_samples=None, seed=0))
                    problem, check = _timed(lambda: values_problem(dataset))
                    assert problem == "", f"{name}: {problem}"
                    loads.append(load)
                    checks.append(check)
            except (OSError, RuntimeError, ValueError) as exc:  # its files are not here (a download needed)
                print(f"| {name} | not loaded here ({type(exc).__name__}) | | |")
                continue
            load, check = statistics.median(loads), statistics.median(checks)
            print(f"| {name} | {load:.3f} | {check:.4f} | {check / load:.4f} |")


if __name__ == "__main__":
    main()
