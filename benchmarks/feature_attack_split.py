"""Where a feature attack's CPU seconds go, on the default dataset (splitnn on digits), one torch thread.

For each seed, one training with every feature attack on it (as ``feature_attack_cost.py`` runs them); the runner's
pieces are wrapped with CPU clocks (``time.process_time``, steadier than wall time on a shared machine), each piece's
own time counted apart from the pieces it calls: the view, the feature prior, initialising networks, the fits
(decoder, surrogate), the shared fits' digests, the inversion's loop, applying networks to targets, scoring, copies
of the trained models; what is left is "the rest" (grn's generator loop, which is grn's own code; elsewhere glue).
Prints, per attack, the median over seeds of each piece's seconds and its share of the training's CPU seconds.

    python benchmarks/feature_attack_split.py [--seeds 0,1,2]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from contextlib import ExitStack
from unittest import mock

import torch

from feature_attack_cost import configs, fresh_run
from vflpriv.attacks.features import decoder_attack, grn, inversion, shared_fits, surrogate
from vflpriv.runner import execution, feature_attacking, feature_prior

#: (module, attribute, piece): the functions timed; a piece's time excludes the timed pieces it calls.
PIECES = [
    (feature_attacking, "feature_view", "view"),
    (feature_prior, "compute", "prior"),
    (feature_attacking, "score_features", "scoring"),
    (feature_attacking.copy, "deepcopy", "model copies"),
    (decoder_attack, "build_decoder", "decoder init"),
    (grn, "init_parameters", "generator/surrogate init"),
    (surrogate, "init_parameters", "generator/surrogate init"),
    (decoder_attack, "fit_regression", "decoder fit"),
    (surrogate, "fit_regression", "surrogate fit"),
    (shared_fits, "_digest", "shared-fit digests"),
    (decoder_attack, "apply_in_batches", "apply to targets"),
    (grn, "apply_in_batches", "apply to targets"),
    (inversion.FeatureInversion, "_invert", "inversion loop"),
]


class Clock:
    """CPU seconds per piece, each piece's own (callees that are pieces subtracted)."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self._stack: list[list] = []

    def wrap(self, fn, piece: str):
        def timed(*args, **kwargs):
            frame = [time.process_time(), 0.0]
            self._stack.append(frame)
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.process_time() - frame[0]
                self._stack.pop()
                self.seconds[piece] += spent - frame[1]
                if self._stack:
                    self._stack[-1][1] += spent
        return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    args = parser.parse_args()
    torch.set_num_threads(1)
    fresh_run(configs(99, tune=False))  # warm-up
    clock = Clock()
    split: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    attack = execution.RUNS["features"]

    def per_attack(a, *args, **kwargs):
        clock.seconds.clear()
        start = time.process_time()
        try:
            return attack(a, *args, **kwargs)
        finally:
            pieces = split[a.config.attack.name]
            pieces["total"].append(time.process_time() - start)
            for piece, seconds in clock.seconds.items():
                pieces[piece].append(seconds)
            other = pieces["total"][-1] - sum(clock.seconds.values())
            pieces["the rest (grn's generator loop; elsewhere glue)"].append(other)

    with ExitStack() as stack:
        for module, name, piece in PIECES:
            stack.enter_context(mock.patch.object(module, name, clock.wrap(getattr(module, name), piece)))
        stack.enter_context(mock.patch.dict(execution.RUNS, {"features": per_attack}))
        trainings: list[float] = []
        train = execution.train

        def timed_train(*a, **k):
            start = time.process_time()
            try:
                return train(*a, **k)
            finally:
                trainings.append(time.process_time() - start)
        stack.enter_context(mock.patch.object(execution, "train", timed_train))
        for seed in (int(s) for s in args.seeds.split(",")):
            fresh_run(configs(seed, tune=False))
    training = statistics.median(trainings)
    print(f"splitnn on digits, seeds {args.seeds}, 1 torch thread; training {training:.3f} CPU s (median)")
    for name, pieces in split.items():
        total = statistics.median(pieces["total"])
        print(f"{name}: {total:.3f} CPU s ({total / training:.2f} x the training)")
        for piece, values in sorted(pieces.items(), key=lambda kv: -statistics.median(kv[1])):
            if piece != "total":
                value = statistics.median(values)
                print(f"  {piece:32s} {value:.4f} s  {value / training:.3f} x")


if __name__ == "__main__":
    main()
