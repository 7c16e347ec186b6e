"""Which settings tell apart runs of one (method, dataset, attack, defense, phase): a grid's axes.

Every record stores its whole configuration. Within each group, the settings (flattened to dotted keys)
that take more than one value, besides the swept strength and the seed, name the group's variants, e.g.
``partition.labeled=400``; tables and CAP keep variants apart instead of averaging across them.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

#: Keys that are the table's own axes (or cannot change results), never part of a variant.
OWN_AXES = {"method.name", "dataset.name", "attack.name", "attack.phase", "seed", "device"}
GROUP = ["method", "dataset", "attack", "defense", "phase"]


def flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted keys of a configuration; list entries by index; the swept defense's strength left out."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out |= flatten(value, f"{name}.")
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for i, item in enumerate(value):
                item = {k: v for k, v in item.items() if not (k == "strength" and item.get("sweep"))}
                out |= flatten(item, f"{name}.{i}.")
        else:
            out[name] = json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else value
    return out


def with_variants(results: pd.DataFrame) -> pd.DataFrame:
    """``results`` with a ``variant`` column ("" where a group has a single configuration)."""
    if results.empty or "config" not in results:
        return results.assign(variant="")
    flat = [flatten(json.loads(c)) if isinstance(c, str) and c else {} for c in results["config"]]
    variants = [""] * len(results)
    positions = pd.Series(range(len(results)), index=results.index)
    for _, rows in results.groupby(GROUP, sort=False):
        where = positions[rows.index].tolist()
        keys = sorted(set().union(*(flat[i].keys() for i in where)) - OWN_AXES)
        varying = [k for k in keys if len({repr(flat[i].get(k)) for i in where}) > 1]
        for i in where:
            variants[i] = ", ".join(f"{k}={flat[i].get(k)}" for k in varying)
    return results.assign(variant=variants)
