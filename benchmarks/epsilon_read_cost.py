"""What recomputing every stored epsilon costs a read (task epsread): ``load_results`` on a synthetic store of label
records under dp-gaussian (sigmas, and a target epsilon), label-dp and embedding-dp, written as the runner writes
them (``epsilon_accounting`` included), with the check (``runner.accountants.miscounted``) and without it, interleaved
in one run, its caches cleared before each read; CPU seconds (``time.process_time``) and their ratio.

    python benchmarks/epsilon_read_cost.py --seeds 20 --rounds 3"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from unittest import mock

from vflpriv.config.sweep import ExperimentConfig
from vflpriv.reports.results import load_results
from vflpriv.runner import accountants, naming
from vflpriv.runner.execution import blank_record
from vflpriv.store.folders import default_store
from vflpriv.store.sqlite import Store

#: The swept settings: (attack, defense, strengths, options), each run at every seed.
SETTINGS = [("mc", "dp-gaussian", [0.5, 1.0, 2.0, 4.0, 8.0, 16.0], {}),
            ("mc", "dp-gaussian", [], {"target_epsilon": 4.0}),
            ("mc", "label-dp", [1.0, 2.0, 4.0, 8.0], {}),
            ("fi-decoder", "embedding-dp", [0.25, 0.5, 1.0, 2.0], {})]


def _records(seeds: int) -> list:
    """One scored record per run, its epsilon from its accountant at the count its settings state (the default
    finetuning: dp-gaussian's 20 uses, embedding-dp's 20 releases and 20 steps)."""
    records = []
    for attack, defense, strengths, options in SETTINGS:
        runs = ExperimentConfig.model_validate({
            "attack": {"name": attack}, "seeds": list(range(seeds)), **({"strengths": strengths} if strengths else {}),
            "defenses": [{"name": defense, "sweep": True, "options": options}]}).runs()
        for run in runs:
            d = run.defenses[0]
            cls = accountants.DEFENSES.get(d.name)
            accountant = accountants.ACCOUNTANTS[accountants.accounting_class(cls)]
            count = None if accountant.count is None else accountant.planned_count(run, d)  # its settings' count
            epsilon, delta = accountant.epsilon(cls, cls.axis.identity if d.strength is None else d.strength,
                                                run.finetune, d.options, count)
            secret = "features" if defense == "embedding-dp" else "labels"
            claim = ({"epsilon_features": epsilon, "epsilon_features_delta": delta} if secret == "features" else
                     {"epsilon": epsilon, "epsilon_delta": delta})
            status = "n/a" if secret == "features" else "ok"  # a scored feature record holds its per-target lists
            entry = {"defense": 0, "revision": cls.revision, "secret": secret, "count": count}
            record = blank_record(run)  # where an option sets the strength, the one its run resolves (hunt3 P11)
            solved = naming.resolved(d, run.finetune) if naming.own_strength_option(d) else None
            records.append(replace(record, num_classes=10, utility=0.8, status=status, **claim,
                                   strength=record.strength if solved is None else solved,
                                   attack_accuracy=0.5, prior_accuracy=0.4, n_targets=100,
                                   epsilon_accounting=json.dumps([entry])))
    return records


def _cold() -> None:
    """Every cache of the check emptied: each read pays for each distinct input once."""
    for cached in (accountants._spent, naming._noise_for, accountants._gaussian, naming._guards):
        cached.cache_clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = default_store(Path(tmp))
        records = _records(args.seeds)
        with Store(path) as store:
            store.put_many(records)
        load_results(path)  # imports and registries warmed once, for both
        cpu: dict[str, list[float]] = {"without the check": [], "with the check": []}
        for _ in range(args.rounds):
            for name in cpu:
                _cold()
                with mock.patch("vflpriv.tradeoff.spelling.miscounted", accountants.miscounted if
                                name == "with the check" else lambda record, run: ""):
                    start = time.process_time()
                    frame = load_results(path)
                    cpu[name].append(time.process_time() - start)
                assert len(frame) == len(records) and not frame.attrs["damaged"], frame.attrs["damaged"][:1]
    print(f"load_results of {len(records)} records ({len(SETTINGS)} settings x strengths x {args.seeds} seeds), "
          f"CPU s over {args.rounds} interleaved rounds,\n  caches cleared before each read:")
    for name, values in cpu.items():
        print(f"  {name:18s} " + "  ".join(f"{v:.3f}" for v in values) + f"   min {min(values):.3f}")
    ratio = min(cpu["with the check"]) / min(cpu["without the check"])
    print(f"  ratio with / without (min over rounds): {ratio:.2f}x")


if __name__ == "__main__":
    main()
