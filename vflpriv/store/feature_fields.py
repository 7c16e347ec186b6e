"""What no run writes into a record's run and feature fields (:class:`vflpriv.store.records.RunRecord`): an unknown
status, phase or secret, a seed its settings refuse, a NaN or negative strength, fewer than 2 classes (review hunt H7),
a config that is not a JSON object, a utility or accuracy outside [0, 1], a victim on a label record, roles that are
not party indices or an adversary that is its own victim, per-target outcomes that are not one 0 or 1 per target, and
on a scored feature record a non-finite MSE, per-target errors that are not one squared error (a number >= 0) per
target, or an image grid that is not what the runner writes. Checked beside
``canary_fields`` on every record read (``RunRecord.from_json``), so a store read sets such a record aside as damaged
(a hand edit).

Only what is cheap is checked here, on the text, without parsing the long lists (a store read parsed every feature
record's per-target errors and image grid before: 1000 image records of 10,000 targets took 11.0 CPU s instead of
1.3, ``benchmarks/store_read_checks.py``): a list is ``[``, numbers (digits, ``.eE+-``), commas and ``]`` with one
value per target, a grid its writer's skeleton with C x H x W values per row. That the per-target errors' means are
the record's MSEs (and finite once parsed) is checked where they are parsed anyway: ``tradeoff.leakage.per_target``."""

from __future__ import annotations

import json
import math
import re

from vflpriv.common.secret_kinds import LABELS, SECRETS
from vflpriv.config.options import MAX_INT

#: Run outcomes (``records.OK`` and the others) and the phases a record's attack may attack.
STATUSES = ("ok", "failed", "n/a")
PHASES = ("pretrain", "finetune")
#: The fields that hold an accuracy, AUC, F1 or share: each NaN (none) or in [0, 1].
RATES = ("utility", "utility_val", "utility_optimistic", "attack_accuracy", "attack_accuracy_train", "attack_auc",
         "attack_tpr_at_1fpr", "attack_accuracy_optimistic", "attack_accuracy_hungarian", "attack_leak_auc",
         "attack_accuracy_best_threshold", "attack_accuracy_oracle", "attack_precision_top", "prior_accuracy",
         "canary_accuracy", "canary_prior_accuracy", "auditor_accuracy", "feature_exact_match")
#: The bytes of a JSON list of numbers, brackets aside: removed, a list written by the runner leaves ``[]``.
_NUMBER = b"0123456789.eE+-, "
#: The head of an image grid as ``runner.feature_attacking.examples`` writes it (``json.dumps``).
_GRID_HEAD = re.compile(r'\{"shape": \[(\d+), (\d+), (\d+)\], ')
#: Its sets after the head, as they read with the numbers removed (each followed by its rows' ``[]``).
_GRID_SETS = (b'"truth":[', b'"attack":[', b'"prior":[')


def problem(record) -> str:
    """What a well-typed record says that no run writes ('' if nothing)."""
    for name, value, valid in (("status", record.status, STATUSES), ("phase", record.phase, PHASES),
                               ("secret", record.secret, SECRETS)):
        if value not in valid:
            return f"its {name} is {value!r:.40}; a record's {name} is {' or '.join(valid)}"
    if not 0 <= record.seed <= MAX_INT:
        return f"its seed {record.seed} is outside 0..{MAX_INT} (the seeds a run's settings accept)"
    if not record.strength >= 0:  # NaN too; +inf is an epsilon axis's identity
        return f"its strength ({record.strength:.6g}) is not a number >= 0 (a defense's strength)"
    if record.num_classes < 0 or record.num_classes == 1 or (record.num_classes == 0 and record.status != "failed"):
        return (f"its num_classes is {record.num_classes}; a run's data has 2 or more (0: a run that failed before "
                "its data loaded)")
    if record.config and not isinstance(_json(record.config), dict):
        return "its config is not a JSON object"
    for name in RATES:
        value = getattr(record, name)
        if not (math.isnan(value) or 0 <= value <= 1):
            return f"its {name} ({value:.6g}) is outside [0, 1] (an accuracy, AUC, F1 or share; NaN: none)"
    if record.secret == LABELS:
        return f"a label record names a victim ({record.victim!r:.20})" if record.victim else _hits_problem(record)
    if not record.victim.isdigit() or not (record.adversary.isdigit() or record.adversary == "server"):
        return (f"its adversary {record.adversary!r:.20} or victim {record.victim!r:.20} is not a party index (the "
                "adversary: or 'server')")
    if record.adversary == record.victim:
        return f"its adversary is its victim (party {record.victim:.20}), which holds its features already"
    if record.status != "ok":
        return ""
    for name, mse in (("attack_errors", "feature_mse"), ("prior_errors", "prior_mse")):
        text = getattr(record, name)
        raw = text.encode("ascii", "replace")  # a non-ASCII character reads "?": no number
        if not raw.startswith(b"[") or raw.translate(None, _NUMBER) != b"[]":
            return f"its {name} is not a JSON list of finite numbers"
        if b"-" in raw.replace(b"e-", b"").replace(b"E-", b""):  # a minus outside an exponent: a negative number
            return f"its {name} holds a negative number (each is a target's squared error)"
        values = raw.count(b",") + 1 if raw.strip(b"[] ") else 0
        if values != record.n_targets or not values:
            return f"its {name} holds {values} values for {record.n_targets} targets"
        if not math.isfinite(getattr(record, mse)):  # the mean of finite numbers
            return f"its {mse} ({getattr(record, mse):.6g}) is not the mean of its {name}"
    if record.feature_examples and not _grid_ok(record.feature_examples):
        return ("its feature_examples is not the image grid's JSON (shape C, H, W; truth, attack and prior: as many "
                "rows each, of C x H x W finite numbers)")
    return ""


def _hits_problem(record) -> str:
    """What is wrong with a label record's per-target outcomes ('' if nothing): each a string of one 0 or 1 per
    target (the paired test reads them; '' where none were recorded)."""
    for name in ("attack_hits", "prior_hits"):
        text = getattr(record, name)
        if text and text.strip("01"):
            return f"its {name} is not one 0 or 1 per target"
        if text and record.n_targets and len(text) != record.n_targets:
            return f"its {name} holds {len(text)} outcomes for {record.n_targets} targets"
    return ""


def lists_problem(record) -> str:
    """What parsing a scored feature record's per-target errors finds ('' if nothing): a number that is not finite,
    or an MSE that is not their mean (:func:`problem` checks the rest without parsing them)."""
    if record.secret == LABELS or record.status != "ok":
        return ""
    for name, mse in (("attack_errors", "feature_mse"), ("prior_errors", "prior_mse")):
        found = errors_problem(errors_of(getattr(record, name)), name, n_targets=record.n_targets, mse=mse,
                               mean=getattr(record, mse))
        if found:
            return found
    return ""


def errors_of(text: object):
    """The per-target errors a record's JSON list holds, as a float array (None where it is no list of finite
    numbers)."""
    import numpy as np  # here: a store read of records without feature lists needs no numpy

    try:
        values = np.array(json.loads(text), float)
    except (TypeError, ValueError):
        return None
    return values if values.ndim == 1 and values.size and np.isfinite(values).all() else None


def errors_problem(values, name: str, *, n_targets: int | None, mse: str, mean: float | None) -> str:
    """What is wrong with a record's parsed per-target ``values`` of its list ``name``: not one finite number per
    target (``n_targets``; None: unknown), or not of mean ``mean``, its ``mse`` (None: unknown); '' if nothing."""
    if values is None:
        return f"its {name} is not a JSON list of finite numbers"
    if n_targets is not None and values.size != n_targets:
        return f"its {name} holds {values.size} values for {n_targets} targets"
    found = math.fsum(values) / values.size
    if mean is not None and not math.isclose(mean, found, rel_tol=1e-9, abs_tol=1e-15):  # False for NaN
        return f"its {mse} ({mean:.6g}) is not the mean of its {name} ({found:.6g})"
    return ""


def _json(text: str) -> object:
    """What the JSON ``text`` holds (None where it is not JSON)."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


def _grid_ok(text: str) -> bool:
    """Whether ``text`` is an image grid as the runner writes it (``runner.feature_attacking.examples``): its shape,
    then truth, attack and prior with as many rows each, each row C x H x W numbers."""
    head = _GRID_HEAD.match(text)
    if head is None or 0 in (size := tuple(map(int, head.groups()))):
        return False
    body = text[head.end():].encode("ascii", "replace")
    skeleton = body.translate(None, _NUMBER)
    rows = skeleton.count(b"[]") // len(_GRID_SETS)
    if not rows or skeleton != b"]".join(s + b"[]" * rows for s in _GRID_SETS) + b"]}":
        return False
    per_row, pos = math.prod(size) - 1, 0  # commas inside a row; each row's counted in place (no copies)
    for _ in range(rows * len(_GRID_SETS)):  # the skeleton holds them: each row is the innermost [ ... ] next
        start = body.index(b"[", pos)
        while body[start + 1:start + 2] == b"[":
            start += 1
        pos = body.index(b"]", start)
        if body.count(b",", start, pos) != per_row:
            return False
    return True
