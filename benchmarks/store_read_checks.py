"""What a store read's record checks cost (issue h46's review): ``read_store`` on a synthetic store of scored image
feature records, with the checks as they are (``store.feature_fields``: the text of the per-target lists and image
grid, each record parsed once) against the checks h46 merged (every record's lists and grid parsed and checked value
by value, each record parsed twice), interleaved in one run; CPU seconds (``time.process_time``) and their ratio.

    python benchmarks/store_read_checks.py --records 1000 --targets 10000 --rounds 3 [--keep r.sqlite]

``--keep`` writes the store there too, to time ``vflpriv table`` on it (``/usr/bin/time vflpriv table r.sqlite``).

The merged checks are reproduced here (``_merged_problem``), the lists' mean check included, which moved to where
the lists are parsed (``tradeoff.leakage.per_target``) and to a sweep resuming its runs (``records.stored``)."""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import tempfile
import time
from pathlib import Path
from unittest import mock

import torch

from vflpriv.runner.feature_attacking import examples
from vflpriv.store import feature_fields
from vflpriv.store.records import RunRecord, stored
from vflpriv.store.sqlite import Store, read_store


def _store(path: Path, *, records: int, targets: int, shape: tuple[int, int, int]) -> None:
    """``records`` scored feature records of ``targets`` targets each, image grids of ``shape`` (seeded)."""
    g = torch.Generator().manual_seed(0)
    rows = []
    for i in range(records):
        attack, prior = torch.rand(targets, generator=g), torch.rand(targets, generator=g)
        grid = examples(*(torch.rand(8, *shape, generator=g) for _ in range(3)))
        rows.append(RunRecord(
            key=f"run{i:05d}", method="splitnn", dataset="cifar10", attack="fi-decoder", defense="none",
            phase="finetune", strength=0.0, seed=i, secret="features", adversary="1", victim="0", status="ok",
            n_targets=targets, attack_errors=json.dumps(attack.tolist()), prior_errors=json.dumps(prior.tolist()),
            feature_mse=math.fsum(json.loads(json.dumps(attack.tolist()))) / targets,
            prior_mse=math.fsum(json.loads(json.dumps(prior.tolist()))) / targets, feature_examples=grid))
    with Store(path) as s:
        s.put_many(rows)


def _finite_list(text: str) -> list | None:
    try:
        values = json.loads(text)
    except (TypeError, ValueError):
        return None
    ok = isinstance(values, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                                          for v in values)
    return values if ok else None


def _merged_grid_ok(text: str) -> bool:
    grid = json.loads(text)
    shape = grid.get("shape")
    sets = [grid.get(k) for k in ("truth", "attack", "prior")]
    return all(_finite_list(json.dumps(row)) is not None and len(row) == math.prod(shape) for rows in sets
               for row in rows)


def _merged_problem(record: RunRecord) -> str:
    """The feature part of h46's ``records.inconsistency`` (per value; the cheap part is as it is now)."""
    for name, mse in (("attack_errors", "feature_mse"), ("prior_errors", "prior_mse")):
        values = _finite_list(getattr(record, name))
        if values is None or len(values) != record.n_targets:
            return f"its {name}"
        if not math.isclose(getattr(record, mse), math.fsum(values) / len(values), rel_tol=1e-9, abs_tol=1e-15):
            return f"its {mse}"
    return "" if _merged_grid_ok(record.feature_examples) else "its grid"


def _merged_read(path: Path) -> int:
    """h46's read: each row parsed and checked value by value, then parsed again."""
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT key, record FROM runs ORDER BY key").fetchall()
    kept = 0
    for key, text in rows:
        with mock.patch.object(feature_fields, "problem", _merged_problem):
            _, problem = stored(key, text)
        if not problem:
            RunRecord.from_json(text)
            kept += 1
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--targets", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="also write the synthetic store here")
    args = parser.parse_args()
    if args.keep is not None:
        _store(args.keep, records=args.records, targets=args.targets, shape=(3, 32, 32))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.sqlite"
        _store(path, records=args.records, targets=args.targets, shape=(3, 32, 32))
        cpu: dict[str, list[float]] = {"merged (h46)": [], "now": []}
        for _ in range(args.rounds):
            for name, read in (("merged (h46)", _merged_read), ("now", lambda p: len(read_store(p).records))):
                start = time.process_time()
                kept = read(path)
                cpu[name].append(time.process_time() - start)
                assert kept == args.records, (name, kept)
    print(f"read_store of {args.records} image feature records x {args.targets} targets (grids 3x32x32), CPU s over "
          f"{args.rounds} interleaved rounds:")
    for name, values in cpu.items():
        print(f"  {name:14s} " + "  ".join(f"{v:.2f}" for v in values) + f"   min {min(values):.2f}")
    print(f"  ratio merged / now (min over rounds): {min(cpu['merged (h46)']) / min(cpu['now']):.1f}x")


if __name__ == "__main__":
    main()
