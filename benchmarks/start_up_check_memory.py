"""What the sweep's start-up check of stored records (``sweep.drop_damaged``) holds and costs (review tidy F1): a store
of ``--records`` records of about ``--pad`` KB each (a real record plus an ignored ``pad`` field), every one of them
disagreeing with its run (``ok``: all deleted) or of other data (``refuse``: refused); tracemalloc's peak inside the
check and its seconds. Run it in each tree to compare (its cwd first on sys.path, so a tree's own code is imported):

    cd <tree> && python benchmarks/start_up_check_memory.py --records 4000 --pad 50
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path[:0] = [os.getcwd(), os.path.join(os.getcwd(), "tests")]


def _store(folder: Path, configs: list, mode: str, pad: int) -> Path:
    """A store of one record per config, each made from one real record (run once) padded to ``pad`` KB."""
    from vflpriv.store.sqlite import Store
    from vflpriv.tradeoff.sweep import sweep

    with Store(folder / "base.sqlite") as store:
        sweep(configs[:1], store)
        (record,) = store.all()
    base = json.loads(record.to_json())
    path = folder / f"{mode}.sqlite"
    with Store(path):
        pass
    rows = []
    for c in configs:
        data = dict(base, key=c.key(), training_key=c.training_key(), pad="x" * (pad * 1024))
        if mode == "refuse":
            data["data_fingerprint"] = "f" * 16
        rows.append((c.key(), c.training_key(), data["status"], json.dumps(data), time.time()))
    with sqlite3.connect(path) as db:
        db.executemany("INSERT INTO runs (key, training_key, status, record, updated) VALUES (?, ?, ?, ?, ?)", rows)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=4000)
    parser.add_argument("--pad", type=int, default=50, help="KB of padding per record")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        os.environ.setdefault("VFLPRIV_CACHE", folder)
        os.environ.setdefault("VFLPRIV_CANARY_KEY", "0123456789abcdef" * 4)
        from conftest import tiny_run
        from vflpriv.common.errors import ConfigError
        from vflpriv.store.sqlite import Store
        from vflpriv.tradeoff import sweep as module

        print("code:", module.__file__)
        fast = {"model": {"hidden": 16, "out_dim": 8}, "finetune": {"epochs": 1, "batch_size": 64}}
        configs = [tiny_run(attack={"name": "mc", "prior": "none", "options": {"epochs": 1}},
                            defenses=[{"name": "label-dp", "strength": 1.0 + i / 1000, "options": {}}], **fast)
                   for i in range(args.records)]
        for mode in ("ok", "refuse"):
            with Store(_store(Path(folder), configs, mode, args.pad)) as store:
                tracemalloc.start()
                start = time.perf_counter()
                try:
                    module.drop_damaged(store, configs, on_note=None)
                    said = "all deleted"
                except ConfigError:
                    said = "refused"
                seconds = time.perf_counter() - start
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
            print(f"{mode}: {said}, {seconds:.2f} s, traced peak {peak / 2**20:.1f} MiB "
                  f"({args.records} records of {args.pad} KB)")


if __name__ == "__main__":
    main()
