"""Which stored records of one training key come from one training: with ``options.secure_noise`` a retraining draws
other noise (review fe2 R1), so such a training is recomputed whole, never partly resumed, and never pooled."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from vflpriv.common.errors import ConfigError
from vflpriv.config.schema import RunConfig
from vflpriv.store.records import RunRecord
from vflpriv.store.sqlite import FINAL, read_store

_FLAG = TypeAdapter(bool)


def secure_settings(config: RunConfig | str) -> bool:
    """Whether a run's settings (a config, or a record's config JSON) draw some defense's noise from OS entropy."""
    if isinstance(config, RunConfig):
        defenses = [d.options for d in config.defenses]
    else:
        try:
            defenses = [d.get("options") or {} for d in (json.loads(config) if config else {}).get("defenses") or []]
        except (ValueError, AttributeError, TypeError):  # a record whose settings do not read: not known to be secure
            return False
    try:
        return any(_FLAG.validate_python(o.get("secure_noise", False)) for o in defenses)
    except ValidationError:  # the planner refuses such a value; nothing ran with it
        return False


def mixed_trainings(records: Iterable[RunRecord]) -> dict[str, list[str]]:
    """Training key -> its records' keys, for each secure-noise training whose records came from more than one
    training: they differ in what one training gives all its records (its utility and training time)."""
    by_training: dict[str, list[RunRecord]] = {}
    for r in records:
        if r.status in FINAL and secure_settings(r.config):  # a failed record is a retry marker (review fe3 F2)
            by_training.setdefault(r.training_key, []).append(r)
    return {k: [r.key for r in rs] for k, rs in by_training.items()
            if len({(repr(r.utility), repr(r.train_seconds)) for r in rs}) > 1}


def partly_stored(configs: Sequence[RunConfig], final: Iterable[RunRecord]) -> list[str]:
    """The keys, among ``final`` (a store's final records), of each secure-noise training of ``configs`` held in part
    or from two trainings: forgotten, it is retrained whole, with a record of one of its runs' settings under another
    key (a revision of the attack's code: review fe3 F1). ConfigError where it holds runs of other settings, which a
    retraining could not keep (review l8 1: deleting them lost them)."""
    groups: dict[str, set[str]] = {}
    for c in configs:
        if secure_settings(c):
            groups.setdefault(c.training_key(), set()).add(c.key())
    held: dict[str, list[RunRecord]] = {}
    for r in final:
        if r.training_key in groups:
            held.setdefault(r.training_key, []).append(r)
    found = []
    for training, records in held.items():
        if not groups[training] - {r.key for r in records} and not mixed_trainings(records):
            continue
        if outside := sorted({r.attack for r in records if r.key not in groups[training]
                              and _current_key(r.config) not in groups[training]}):
            raise ConfigError(f"the results store holds records of a secure-noise training ({training}) of runs this "
                              f"command does not make ({', '.join(outside)}: other attacks, or other settings of them) "
                              "and lacks some of its runs: a retraining draws other noise (options.secure_noise), so "
                              "its records must come from one training; run those in the same command, or give "
                              "another --out or --store")
        found += [r.key for r in records]
    return found


def _current_key(config: str) -> str | None:
    """The key the current code gives a record's settings (a revision's marks its own, ``device`` and the defaults of
    fields added since as they read now), None where they do not read: its text alone refused the command's own
    records written on another device or before a field existed (review l9 L9-3)."""
    try:
        return RunConfig.model_validate_json(config).key()
    except Exception:  # noqa: BLE001 - settings the current code cannot read are no run of this command
        return None


def secure_records(path: Path, configs: Sequence[RunConfig]) -> list[RunRecord]:
    """The final records of the store at ``path`` where ``configs`` hold a secure-noise training (none read else)."""
    if not any(secure_settings(c) for c in configs):
        return []
    return [r for r in read_store(path).records if r.status in FINAL]
