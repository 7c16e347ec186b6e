"""Which settings tell apart runs of one (method, dataset, attack, defense, phase): a grid's axes.

Every record stores its whole configuration. The settings (flattened to dotted keys) that take more than one
value, besides the swept strength and the seed, name the variants, e.g. ``partition.labeled=400``; tables, CAP and
the leakage tests keep variants apart instead of averaging across them (a defense's kinds read as what it acts on:
ISO ``on gradient`` and ``on embedding`` are two settings). A setting of the training or of the attack
block as a whole (its prior, tuning) is compared across every attack on one secret of one (method, dataset, defense,
phase), so that the attacks on one training carry the same name (the worst case takes the strongest of them, per
variant; the secrets apart, so that a label attack is not named by the roles of the feature attacks beside it); an
attack's own options only within that attack's runs (attacks have different options). Where two configurations of
one such group would read alike, every attack of the group spells its settings as written. The records come in one
spelling of their run (``reports.results``: parsed by the current code, then ``tradeoff.spelling``'s rule: a setting
the planner resolves the same at its default is written at its default), so one setting written two ways is one name.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where a frame is made: the audit's planning imports this module for acts_on
    import pandas as pd

#: Keys that are the table's own axes (or cannot change results), never part of a variant.
OWN_AXES = {"method.name", "dataset.name", "attack.name", "attack.phase", "seed", "device"}
#: The cell whose runs are compared for every setting but an attack's own (:data:`PER_ATTACK`).
CELL = ["method", "dataset", "defense", "phase"]
#: A feature attack's roles: never a variant of its records, which name them in their own columns (``adversary``,
#: ``victim``) that every table keeps apart (a label record's adversary is a variant: ``--all-adversaries``).
ROLES = ("attack.adversary", "attack.victim")
#: Settings that belong to one attack: compared only within that attack's runs.
PER_ATTACK = ("attack.options.", "attack.search_space.")


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
    import pandas as pd

    positions = pd.Series(range(len(results)), index=results.index)
    secret = results["secret"].fillna("labels") if "secret" in results else pd.Series("labels", index=results.index)
    keys = results[["attack"]]  # the groups' rows are all a loop reads: not every column copied per group
    for (*_, which), cell in keys.groupby([*(results[c] for c in CELL), secret], sort=False, dropna=False):
        shared = _varying(flat, positions[cell.index].tolist(), own=False)
        if which == "features":
            shared = [k for k in shared if k not in ROLES]
        attacks, collide = [], False
        for _, rows in cell.groupby("attack", sort=False):
            where = positions[rows.index].tolist()
            varying = sorted([*shared, *_varying(flat, where, own=True)])
            named = {i: ", ".join(shown(flat[i], k) for k in varying) for i in where}
            told = {}  # a name two configurations share (kinds unset and set to what unset resolves to)
            for i in where:
                told.setdefault(named[i], set()).add(tuple(repr(flat[i].get(k)) for k in varying))
            collide = collide or any(len(configs) > 1 for configs in told.values())
            attacks.append((where, varying, named))
        for where, varying, named in attacks:  # one collision writes every attack's names of the cell out, so that
            for i in where:  # one setting reads one way for all the attacks on one training (review last2 R5)
                variants[i] = ", ".join(shown(flat[i], k, written=True) for k in varying) if collide else named[i]
    return results.assign(variant=variants)


#: The settings a training's progress label names already (its method, defenses and seed), or that are no training's
#: (its attacks', its device).
LABELLED = re.compile(r"method\.name|seed|device|attack\..*|defenses\.\d+\.(name|sweep)")


#: The names a training's progress label gives (its method's, its defenses'): trainings of other names read apart.
NAMES = re.compile(r"method\.name|defenses\.\d+\.name")


def told_apart(groups: dict[str, list[Any]]) -> dict[str, str]:
    """Per training (key: its runs), the settings that tell it from the others of its method and defenses beyond its
    progress label, as ``finetune.lr=0.01`` ('' where none): two learning rates read alike (review hunt3 P5)."""
    flat = {key: flatten(json.loads(runs[0].recorded())) for key, runs in groups.items()}
    alike: dict[tuple, list[str]] = {}  # the trainings of one method and defenses (the label's names)
    for key, f in flat.items():
        alike.setdefault(tuple(sorted((k, v) for k, v in f.items() if NAMES.fullmatch(k))), []).append(key)
    apart = {}
    for keys in alike.values():
        varying = sorted(k for k in set().union(*(flat[t] for t in keys)) if not LABELLED.fullmatch(k)
                         and len({repr(flat[t].get(k)) for t in keys}) > 1)
        apart |= {t: ", ".join(shown(flat[t], k) for k in varying) for t in keys}
    return apart


def shown(flat: dict[str, Any], key: str, *, written: bool = False) -> str:
    """A variant's part for ``key``: ``key=value`` (a setting left unset: ``key=unset``, as the rest of the tool
    says, not Python's None), with what a setting the planner resolves ran as (``attack.prior_ssl=auto (own)``,
    ``spelling.ran_as``); a defense's kinds as what it acts on (:func:`acts_on`), so that its two configurations
    read apart (``written``: as the configuration gives them, unset included)."""
    from vflpriv.tradeoff.spelling import ran_as  # the planner's registries: only where records are named

    if written or not (match := re.fullmatch(r"defenses\.(\d+)\.kinds", key)):
        return f"{key}={unset(flat.get(key))}{ran_as(flat, key)}"
    kinds, i = flat.get(key), match[1]
    return acts_on(flat.get(f"defenses.{i}.name"), flat.get(f"defenses.{i}.phase"),
                   json.loads(kinds) if isinstance(kinds, str) else kinds, method=flat.get("method.name"),
                   party=flat.get(f"defenses.{i}.party"))


def unset(value: Any) -> Any:
    """A setting's value as reports show it: "unset" for None (``partition.aux_features`` left to its default)."""
    return "unset" if value is None else value


def acts_on(name: str, phase: str, kinds: list[str] | None, *, method: str | None = None,
            party: int | None = None) -> str:
    """``on embedding``: the kinds of message a defense configuration acts on, unset kinds resolved as the planner
    resolves them for ``method`` (the defense's defaults for its phase that the protecting party sends, else the kinds
    it supports that the party sends: sparsify in FedHSSL's pretraining acts on embeddings and weights, not on the
    gradients it defaults to), or, without a method, to the defense's default for its phase."""
    if kinds is None:
        from vflpriv.config.registry import DEFENSES  # the registry imports the defenses: not at module import
        from vflpriv.runner.defense_planning import unset_kinds

        if name not in DEFENSES.names():
            return "on default"
        found = unset_kinds(name, method, party=party, phase=phase) if method is not None else None
        kinds = found or DEFENSES.get(name).default_kinds_for(phase)
    return "on " + "+".join(kinds)


def _varying(flat: list[dict[str, Any]], where: list[int], *, own: bool) -> list[str]:
    """The keys (an attack's own, or every other) that take more than one value among the runs ``where``."""
    keys = set().union(*(flat[i].keys() for i in where)) - OWN_AXES
    keys = {k for k in keys if k.startswith(PER_ATTACK) == own}
    return [k for k in keys if len({repr(flat[i].get(k)) for i in where}) > 1]
