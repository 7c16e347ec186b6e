"""Table analogues of the papers (``vflpriv reproduce``): a grid run into one store, the paper's numbers and
claims beside vflpriv's, each claim judged on the records.

An analogue is a YAML file in this folder: ``title``, ``paper``, ``setting`` (how the analogue differs from the
paper: data, budget), ``grid`` (a ``vflpriv sweep`` grid) and ``preset`` under it, ``parts`` (a list of settings
for settings that vary together, e.g. ``partition.labeled`` with ``partition.aligned_fraction``: the grid runs once
per part, all into one store), ``quick`` (settings for a few-minute version on bundled data), ``by`` (the setting
that separates rows beside the method), ``targets`` (a target utility per ``by`` value: the runs then record their
learning curve, ``finetune.curve``, and ``mb_to_target`` is the MB sent until the first epoch at or above it, inf
if never), ``select`` (a finetuning setting chosen per seed on a validation split:
:mod:`vflpriv.workflows.reproductions.selection`), ``paper_numbers`` (rows of the paper's own table) and ``claims`` (see :mod:`vflpriv.workflows.reproductions.claims`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vflpriv.common.errors import ConfigError
from vflpriv.config.overrides import apply_overrides
from vflpriv.config.parse import merged, read_config_file
from vflpriv.config.presets import load as load_preset
from vflpriv.workflows.reproductions.selection import Selection

FOLDER = Path(__file__).parent


@dataclass(frozen=True)
class Analogue:
    """One shipped analogue (see the module)."""

    name: str
    title: str
    paper: str
    setting: str
    grid: dict[str, Any]
    preset: str | None
    parts: list[dict[str, Any]]
    quick: dict[str, Any]
    by: str
    paper_numbers: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    targets: dict[Any, float] = field(default_factory=dict)
    select: Selection | None = None

    def grids(self, *, quick: bool, overrides: list[str] = ()) -> list[dict[str, Any]]:
        """Each part's grid as ``vflpriv sweep`` would read it: the preset, the grid over it, the part's settings,
        the quick ones (with ``quick``), then the user's ``--set``."""
        out = []
        for part in self.select.parts(self.parts) if self.select else self.parts or [{}]:
            raw = copy.deepcopy(merged(load_preset(self.preset) if self.preset else {}, self.grid))
            for key, value in {**part, **(self.quick if quick else {})}.items():
                _assign(raw, key, value)
            if self.targets:
                _assign(raw, "finetune.curve", True)
            apply_overrides(raw, overrides)
            out.append(raw)
        return out


def _assign(raw: dict[str, Any], dotted: str, value: Any) -> None:
    node = raw
    *path, last = dotted.split(".")
    for part in path:
        node = node.setdefault(part, {})
    node[last] = value


def names() -> list[str]:
    return sorted(p.stem for p in FOLDER.glob("*.yaml"))


def load(name: str) -> Analogue:
    """The analogue ``name``; an unknown name lists the shipped ones."""
    if name not in names():
        raise ConfigError(f"unknown analogue '{name}'; valid analogues: {', '.join(names())}")
    data = read_config_file(FOLDER / f"{name}.yaml")
    missing = sorted({"title", "paper", "setting", "grid", "by"} - set(data))
    if missing:
        raise ConfigError(f"analogue file {name}.yaml lacks {', '.join(missing)}")
    return Analogue(name=name, title=data["title"], paper=data["paper"], setting=" ".join(data["setting"].split()),
                    grid=data["grid"], preset=data.get("preset"), parts=data.get("parts", []),
                    quick=data.get("quick", {}), by=data["by"],
                    paper_numbers=data.get("paper_numbers", []), claims=data.get("claims", []),
                    targets=data.get("targets", {}),
                    select=Selection.parse(data["select"]) if data.get("select") else None)
