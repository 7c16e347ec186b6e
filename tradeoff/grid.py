"""Grids: an experiment file whose plural keys are axes, expanded into runs (``vflpriv sweep``).

Beside everything an experiment file holds, a grid may give

- ``methods``, ``datasets``: lists of names or sections (``{name: fedhssl, options: {...}}``, ``{name: letter,
  root: ...}``), each entry replacing ``method`` / ``dataset``;
- ``attacks``: names or ``{name, options}`` sections, all evaluated on each training (they replace
  ``attack.name``; ``attack`` keeps the shared phase and prior);
- ``axes``: ``{dotted.key: [values]}`` for any other setting (``partition.labeled: [200, 400]``);
- ``method_options``: ``{method-name pattern: options}`` folded into each cell's method whose name matches.

The grid is the cross product. It is expanded from the file as written, so each dataset still fills the
partition fields the file leaves unset with its own defaults. Cells that cannot run (the planner's
``IncompatibleError``: an attack on messages a method never sends, a binary-only attack on a 10-class
dataset) are set aside with their reason; any other bad value fails the whole grid, before any training.
"""

from __future__ import annotations

import copy
import difflib
import itertools
import math
from dataclasses import dataclass
from typing import Any

from vflpriv.common.errors import ConfigError, IncompatibleError
from vflpriv.config.parse import (
    DATASET_SETTINGS,
    METHOD_OPTIONS,
    check_shape,
    resolve_dataset_settings,
    resolve_method_options,
    unmatched,
    validate,
)
from vflpriv.config.schema import RunConfig
from vflpriv.config.sweep import ExperimentConfig
from vflpriv.runner.planning import plan

PLURAL = ("methods", "datasets", "attacks", "axes")
#: The largest grid ``vflpriv sweep`` expands: cells (method x dataset x axis values) and runs (cells x strengths x
#: seeds x attacks). A grid beyond either is refused with its size before anything is expanded (a typo such as an
#: axis of range(10000) would otherwise validate millions of cells for minutes with no output).
MAX_CELLS = 10_000
MAX_RUNS = 200_000


@dataclass(frozen=True)
class SkippedCell:
    method: str
    dataset: str
    attack: str
    reason: str


@dataclass
class Grid:
    runs: list[RunConfig]
    skipped: list[SkippedCell]
    jobs: int
    backend: str
    runs_per_gpu: int = 1

    @property
    def trainings(self) -> int:
        return len({r.training_key() for r in self.runs})


def _entries(value: Any, key: str) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"grid key {key} must be a non-empty list of names or sections, got {value!r}")
    out = []
    for item in value:
        if isinstance(item, str):
            out.append({"name": item})
        elif isinstance(item, dict) and isinstance(item.get("name"), str):
            out.append(dict(item))
        else:
            raise ConfigError(f"grid key {key}: each entry is a name or a section with a name, got {item!r}")
    return out


def _set(data: dict[str, Any], dotted: str, value: Any) -> None:
    node = data
    parts = dotted.split(".")
    if "" in parts:
        raise ConfigError(f"grid axis '{dotted}' is not a dotted setting name")
    for i, part in enumerate(parts[:-1]):
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            where = ".".join(parts[: i + 1])
            raise ConfigError(f"grid axis '{dotted}': '{where}' is a value, not a section")
    node[parts[-1]] = copy.deepcopy(value)


def _check_keys(data: dict[str, Any], where: str = "grid file") -> None:
    """A grid file's own keys: unknown ones (with the closest valid key), and a list under a singular key, are
    errors of the file, not of each cell."""
    valid = [*ExperimentConfig.model_fields, *PLURAL, METHOD_OPTIONS]  # and a preset's dataset_settings
    for key in data:
        if key not in valid and key != DATASET_SETTINGS:
            close = difflib.get_close_matches(str(key), valid, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"{where}: unknown setting {key}{hint}; valid keys here: {', '.join(valid)}")
    for singular in ("method", "dataset"):
        if isinstance(data.get(singular), list):
            raise ConfigError(f"{where}: {singular} takes one section; list several under {singular}s: "
                              f"({singular}s: [{', '.join(map(str, data[singular][:3]))}])")
        if singular in data and f"{singular}s" in data:
            raise ConfigError(f"{where}: both {singular} and {singular}s are given; one of them would be dropped: "
                              f"keep {singular}s (the grid's axis) or {singular}")
    attack = data.get("attack")
    if "attacks" in data and isinstance(attack, dict) and "name" in attack:
        raise ConfigError(f"{where}: both attack.name and attacks are given; one of them would be dropped: list the "
                          "attacks under attacks (attack keeps the shared phase and prior)")
    for plural in ("methods", "datasets", "attacks"):
        entries = data.get(plural)
        if isinstance(entries, list):
            shown = [repr(e) if not isinstance(e, str) else e for e in entries]
            repeated = sorted({s for s in shown if shown.count(s) > 1})
            if repeated:
                raise ConfigError(f"{where}: {plural} repeat: {', '.join(repeated)}; give each once")


def _check_size(data: dict[str, Any], sizes: list[int], where: str = "grid file") -> None:
    """Refuse a grid larger than :data:`MAX_CELLS` cells or :data:`MAX_RUNS` runs, counted before expanding it."""
    cells = math.prod(sizes)
    per_cell = 1
    for key, default in (("strengths", 3), ("seeds", 3)):
        value = data.get(key)
        per_cell *= len(value) if isinstance(value, list) else default
    names = (data.get("attack") or {}).get("name") if isinstance(data.get("attack"), dict) else None
    per_cell *= len(names) if isinstance(names, list) else 1
    if cells > MAX_CELLS or cells * per_cell > MAX_RUNS:
        raise ConfigError(f"{where}: {cells:,} cells and {cells * per_cell:,} runs exceed the limit of {MAX_CELLS:,} "
                          f"cells or {MAX_RUNS:,} runs; split the grid into several files (they can share one --store)")


def experiments(raw: dict[str, Any], *, must_match: set[str] | None = None, where: str = "grid file"
                ) -> list[ExperimentConfig]:
    """One validated experiment per grid cell (method x dataset x axis values; attacks stay a list). Each pattern of
    ``must_match`` (default: every ``method_options`` pattern) must match a method of the grid."""
    _check_keys(raw, where)
    if must_match is None:
        table = raw.get(METHOD_OPTIONS)
        must_match = set(table) if isinstance(table, dict) else set()
    matched: set[str] = set()
    data = copy.deepcopy(raw)
    per_dataset = data.pop(DATASET_SETTINGS, None)
    plural = {k: data.pop(k) for k in PLURAL if k in data}
    check_shape(ExperimentConfig, data, source=where)
    methods = _entries(plural["methods"], "methods") if "methods" in plural else [None]
    datasets = _entries(plural["datasets"], "datasets") if "datasets" in plural else [None]
    axes = plural.get("axes", {})
    if not isinstance(axes, dict) or not all(isinstance(v, list) and v for v in axes.values()):
        raise ConfigError(f"grid key axes must map dotted setting names to non-empty lists, got {axes!r}")
    for key, values in axes.items():  # a value twice gave its cells twice, kept once: the grid was not what it said
        shown = [repr(v) for v in values]
        if repeated := sorted({s for s in shown if shown.count(s) > 1}):
            raise ConfigError(f"{where}: axes {key} repeats {', '.join(repeated)}; give each value once")
    if "attacks" in plural:
        attacks = _entries(plural["attacks"], "attacks")
        extra = sorted({k for a in attacks for k in a} - {"name", "options"})
        if extra:
            raise ConfigError(f"grid key attacks: an entry takes name and options only, got {', '.join(extra)}; "
                              "what the attacks share (phase, prior, tune, ...) goes under attack:, e.g. "
                              f"attack: {{{extra[0]}: ...}}")
        section = data.setdefault("attack", {})
        section["name"] = [a["name"] for a in attacks] if len(attacks) > 1 else attacks[0]["name"]
        given = {a["name"]: a["options"] for a in attacks if "options" in a}
        if given:
            section["options"] = given if len(attacks) > 1 else given[attacks[0]["name"]]
    _check_size(data, [len(methods), len(datasets), *map(len, axes.values())], where)
    out, seen = [], {}
    for method, dataset, *values in itertools.product(methods, datasets, *axes.values()):
        cell = copy.deepcopy(data)
        if method is not None:
            cell["method"] = method
        if dataset is not None:
            cell["dataset"] = dataset
        for key, value in zip(axes, values):
            _set(cell, key, value)
        matched |= resolve_method_options(cell)
        resolve_dataset_settings(cell, per_dataset)
        cell_name = ", ".join(f"{k}={v}" for k, v in [("method", (method or {}).get("name")),
                                                   ("dataset", (dataset or {}).get("name")), *zip(axes, values)] if v)
        out.append(validate(ExperimentConfig, cell, context=f"grid cell ({cell_name}): " if cell_name else ""))
        _once(out[-1], dict(zip(axes, values)), seen, where)
    unmatched(must_match - matched, sorted({e.method.name for e in out}))
    return out


def _once(cell: ExperimentConfig, values: dict[str, Any], seen: dict[str, dict[str, Any]], where: str) -> None:
    """Refuse a cell another cell of the grid already is once validated: an axis giving one value in two spellings
    (``[5, 5.0]``, ``[0.001, '1e-3']``) ran it once (review lo3 F2)."""
    dump = cell.model_dump_json()
    if dump in seen:
        differ = [f"{k} ({seen[dump][k]!r} and {v!r})" for k, v in values.items() if repr(seen[dump][k]) != repr(v)]
        raise ConfigError(f"{where}: " + (f"axes {', '.join(differ)} give" if differ else "two methods or datasets "
                          "give") + " the same setting twice; give each value once")
    seen[dump] = values


def expand(raw: dict[str, Any], *, must_match: set[str] | None = None, where: str = "grid file") -> Grid:
    """Every run of the grid, each planned; cells that cannot run set aside with the planner's reason. ``where`` names
    the grid in errors (a file, or an analogue with the user's --set)."""
    cells = experiments(raw, must_match=must_match, where=where)
    runs: dict[str, RunConfig] = {}
    for run in (r for e in cells for r in e.runs()):
        runs.setdefault(run.key(), run)
    by_training: dict[str, list[RunConfig]] = {}
    for run in runs.values():
        by_training.setdefault(run.training_key(), []).append(run)
    kept, skipped = [], {}
    for group in by_training.values():
        try:
            plan(group)
            kept += group
            continue
        except IncompatibleError:
            pass
        for run in group:
            try:
                plan([run])
                kept.append(run)
            except IncompatibleError as exc:
                cell = SkippedCell(run.method.name, run.dataset.name, run.attack.name, str(exc))
                skipped.setdefault((cell.method, cell.dataset, cell.attack), cell)
    if not kept:
        reasons = "; ".join(sorted({s.reason for s in skipped.values()}))
        raise IncompatibleError(f"no cell of the grid can run: {reasons}")
    return Grid(kept, list(skipped.values()), cells[0].jobs, cells[0].backend, cells[0].runs_per_gpu)
