"""Which stored records of one training key come from one training: with ``options.secure_noise`` a retraining draws
other noise (review fe2 R1), so such a training is recomputed whole, never partly resumed, and never pooled."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence

from pydantic import TypeAdapter, ValidationError

from vflpriv.config.schema import RunConfig
from vflpriv.store.records import RunRecord

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
        if secure_settings(r.config):
            by_training.setdefault(r.training_key, []).append(r)
    return {k: [r.key for r in rs] for k, rs in by_training.items()
            if len({(repr(r.utility), repr(r.train_seconds)) for r in rs}) > 1}


def partly_stored(configs: Sequence[RunConfig], final: Callable[[str], RunRecord | None]) -> list[str]:
    """The keys with a final record (``final(key)``, else None) of each secure-noise training of ``configs`` that holds
    only some of its records, or records of two trainings: forgotten, the training is recomputed whole."""
    groups: dict[str, list[str]] = {}
    for c in configs:
        if secure_settings(c):
            groups.setdefault(c.training_key(), []).append(c.key())
    found = []
    for keys in groups.values():
        held = {k: r for k in keys if (r := final(k)) is not None}
        if held and (len(held) < len(keys) or mixed_trainings(held.values())):
            found += held
    return found
