"""A paper analogue's table from its store (issue 24): per method (and its options) and swept setting, the mean ± std
over seeds of utility, finetuning-phase messages and MB, attack and prior accuracy and leakage.

    python benchmarks/paper_analogue.py STORE [STORE ...] [--by partition.labeled]

``--by`` names the setting that separates the rows beside the method (a grid axis, or a setting that differs
between the stores, read from each run's config).
"""

from __future__ import annotations

import argparse
import json

import pandas as pd

from vflpriv import load_results
from vflpriv.store import read_store


def setting(store: str, path: str) -> dict[str, object]:
    """Each run's value of the dotted setting ``path``, by run key."""
    found = {}
    for record in read_store(store if store.endswith(".sqlite") else f"{store}/results.sqlite").records:
        value = json.loads(record.config) if isinstance(record.config, str) else record.config
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        found[record.key] = value
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stores", nargs="+")
    parser.add_argument("--by", default=None, help="dotted setting that separates rows, e.g. partition.labeled")
    args = parser.parse_args()
    frames = []
    for store in args.stores:
        runs = load_results(store)
        runs = runs[runs["status"].isin(["ok", "n/a"])].copy()  # n/a: a non-federated reference (utility only)
        runs["setting"] = runs["key"].map(setting(store, args.by)) if args.by else ""
        frames.append(runs)
    runs = pd.concat(frames)
    options = runs["variant"].fillna("").str.replace(r"partition\.[a-z_]+=[^,]+,?\s*", "", regex=True).str.strip(", ")
    runs["row"] = runs["method"] + options.map(lambda o: f" ({o})" if o else "")
    print(f"| method | {args.by or ''} | seeds | utility | finetune messages | finetune MB | attack | prior | leakage |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for (row, value), g in runs.groupby(["row", "setting"], sort=True):
        def ms(column: str) -> str:
            x = g[column].astype(float)
            return "n/a" if x.isna().all() else f"{x.mean():.3f} ± {x.std(ddof=1):.3f}" if len(x) > 1 else f"{x.mean():.3f}"
        print(f"| {row} | {value} | {g['seed'].nunique()} | {ms('utility')} | {g['comm_messages_finetune'].mean():.0f} "
              f"| {g['comm_mb_finetune'].mean():.3f} | {ms('attack_accuracy')} | {ms('prior_accuracy')} "
              f"| {ms('leakage')} |")


if __name__ == "__main__":
    main()
