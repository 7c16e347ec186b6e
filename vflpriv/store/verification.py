"""Checks of stored records against the run as it would be made now: a record that reads, the data it was computed
on, the canary key its canaries were drawn with: the writing store's reads (:func:`checked_record`), the sweep's
checks (``tradeoff.gap.record_problems``, ``sweep.drop_damaged``'s refusal) and planning's (``store.reading``)."""

from __future__ import annotations

from collections.abc import Iterable

from vflpriv.store.records import RunRecord, stored


#: What a plugin's declaration of fitted preprocessings puts before its data's fingerprint (``data.load._declared``):
#: ``fitted:<digest of the declaration>|``.
DECLARED = "fitted:"


def shown_data(fingerprint: str, width: int, *, empty: str = "as bundled") -> str:
    """A data fingerprint as a message prints it: the data's part cut to ``width`` characters, a plugin's declaration
    named whole beside it, so that two fingerprints differing in either part print apart (review fe3 F4)."""
    declared, _, data = fingerprint.partition("|") if fingerprint.startswith(DECLARED) else ("", "", fingerprint)
    shown = data[:width] or empty
    return f"{shown} with fitted_features declaration {declared.removeprefix(DECLARED)}" if declared else shown


def checked_record(key: str, text: str) -> RunRecord:
    """The record stored under ``key``, or ValueError saying what is wrong with it."""
    record, problem = stored(key, text, lists=True)
    if problem:
        raise ValueError(f"the stored record of run {key} is damaged: {problem}")
    return record


def other_canary_key(rows: Iterable[tuple[str, object]], current: str) -> list[tuple[str, str]]:
    """The rows whose canaries were drawn with a key other than ``current`` (a record without canaries has none)."""
    now = current[:16] or "not made yet"
    return [(key, f"its canaries were drawn with canary key {found[:16]}, the key now is {now}")
            for key, found in rows if isinstance(found, str) and found and found != current]


def other_data(rows: Iterable[tuple[str, object]], expected: dict[str, str]) -> list[tuple[str, str]]:
    """The rows whose fingerprint is known and differs. A record written before the field is kept as it is: which
    data it read is unknown, and an upgrade must not recompute (nor refuse) every store of a non-bundled dataset."""
    other = []
    for key, found in rows:
        if found is None:
            continue
        found = found if isinstance(found, str) else ""
        if found != expected[key]:
            other.append((key, f"computed on data {shown_data(found, 16)}, this data is "
                               f"{shown_data(expected[key], 16)}"))
    return other
