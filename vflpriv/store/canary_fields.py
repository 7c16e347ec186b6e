"""What no canary audit writes into a record (:class:`vflpriv.store.records.RunRecord`): counts out of order, guesses
without canaries, a canary label with one candidate, a negative epsilon or a delta outside [0, 1]. A store read
treats such a record as damaged (named, left out, recomputed by the command that owns it), so no bound or claim test
is ever computed from a hand-edited or corrupted field."""

from __future__ import annotations

import json
import math

#: The epsilons a record may carry (NaN: none), each a number >= 0, and the deltas, each NaN or in [0, 1].
EPSILONS = ("epsilon", "epsilon_lower", "epsilon_fdp", "auditor_epsilon_lower", "auditor_epsilon_fdp",
            "auditor_mu_lower", "auditor_epsilon_gdp_estimate", "epsilon_features")
DELTAS = ("epsilon_delta", "epsilon_lower_delta", "epsilon_features_delta")


def problem(fields: dict) -> str:
    """What is impossible in a record's canary and claim ``fields`` (its JSON, types already checked; absent fields
    take their defaults), or ''."""
    canaries = fields.get("canaries", 0)
    if canaries < 0:
        return f"canaries is {canaries}, below 0"
    classes = fields.get("canary_classes", 0)
    if classes < 0 or classes == 1:  # 0: a record written before the field
        return f"canary_classes is {classes}; a canary's label has at least 2 candidates"
    for name in ("canary_counts", "auditor_counts"):
        wrong = _counts_problem(fields.get(name, ""), canaries)
        if wrong:
            return f"{name} {wrong}"
    for name in ("canary_guesses", "auditor_guesses"):
        if not 0 <= fields.get(name, 0) <= canaries:
            return f"{name} is {fields[name]}, outside 0..{canaries} (the canaries)"
    for name in EPSILONS:
        value = fields.get(name, math.nan)
        if value is not None and value < 0:
            return f"{name} is {value}, below 0"
    for name in DELTAS:
        value = fields.get(name, math.nan)
        if value is not None and not math.isnan(value) and not 0 <= value <= 1:
            return f"{name} is {value}, outside [0, 1]"
    return ""


def _counts_problem(text: str, canaries: int) -> str:
    """What is wrong with a JSON menu of [guesses kept, right] counts of ``canaries`` canaries ('' for none)."""
    if not text:
        return ""
    try:
        counts = json.loads(text)
    except ValueError:
        return f"holds {text!r:.40}, not JSON"
    if not isinstance(counts, list) or not all(
            isinstance(e, list) and len(e) == 2 and all(type(v) is int for v in e) for e in counts):
        return f"holds {text!r:.40}; expected [[guesses, right], ...] of integers"
    bad = next(((g, r) for g, r in counts if not 0 <= r <= g <= canaries), None)
    if bad is not None:
        return (f"entry [{bad[0]}, {bad[1]}] is impossible with {canaries} canaries (need 0 <= right <= guesses <= "
                "canaries)")
    return ""
