"""A store whose canary or claim fields were edited by hand: a record no audit can write (more right guesses than
guesses, a negative or fractional count, guesses without canaries, a negative claim or delta, one class) is a damaged
record, named in one warning line and left out, so no epsilon is printed from it and no table fails on it."""

from __future__ import annotations

import json
import math
import sqlite3

import pandas as pd
import pytest
from typer.testing import CliRunner

from vflpriv.cli.app import app
from vflpriv.store.records import RunRecord
from vflpriv.store.sqlite import Store

COUNTS = [[25, 3], [13, 2], [7, 1], [3, 1]]


def _record(seed: int, attack: str = "gc", **fields) -> RunRecord:
    base = dict(key=f"{attack}-{seed}", training_key=f"t{seed}", method="splitnn", dataset="digits", attack=attack,
                defense="dp-gaussian", phase="finetune", strength=1.0, seed=seed, status="ok", num_classes=10,
                strength_axis="sigma", strength_stronger="higher", utility=0.8, attack_accuracy=0.2,
                prior_accuracy=0.2, leakage=0.0, canaries=25, canary_guesses=25, canary_accuracy=0.12,
                canary_classes=10, canary_counts=json.dumps(COUNTS), epsilon=2.0, epsilon_delta=1e-5,
                epsilon_lower=0.0, epsilon_lower_delta=1e-5, epsilon_fdp=0.0)
    return RunRecord(**(base | fields))


#: One hand edit of a stored record's JSON each, and what the warning must name.
EDITS = {
    "more right than guessed": ({"canary_counts": json.dumps([[25, 30], [13, 13], [7, 7], [3, 3]])}, "canary_counts"),
    "a negative count": ({"canary_counts": json.dumps([[25, -5], [13, 3]])}, "canary_counts"),
    "more guesses than canaries": ({"canary_counts": json.dumps([[250, 250]])}, "canary_counts"),
    "fractional counts": ({"canary_counts": "[[25.5, 3]]"}, "canary_counts"),
    "counts not pairs": ({"canary_counts": "[1, 2, 3]"}, "canary_counts"),
    "counts not JSON": ({"canary_counts": "[[1, 2"}, "canary_counts"),
    "guesses without canaries": ({"canaries": 0}, "canary_counts"),
    "negative canaries": ({"canaries": -3}, "canaries"),
    "guesses above canaries": ({"canary_guesses": 40}, "canary_guesses"),
    "one class": ({"canary_classes": 1}, "canary_classes"),
    "negative classes": ({"canary_classes": -4}, "canary_classes"),
    "a negative claim": ({"epsilon": -2.0}, "epsilon"),
    "a claim's delta of 2": ({"epsilon_delta": 2.0}, "epsilon_delta"),
    "a negative bound's delta": ({"epsilon_lower_delta": -0.5}, "epsilon_lower_delta"),
    "impossible auditor counts": ({"auditor": "gradient-lrt", "auditor_counts": json.dumps([[25, 26]])},
                                  "auditor_counts"),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_a_record_with_impossible_canary_fields_is_damaged(edit):
    fields, named = EDITS[edit]
    text = json.dumps(json.loads(_record(0).to_json()) | fields)
    with pytest.raises(ValueError, match=rf"\b{named}\b"):
        RunRecord.from_json(text)


@pytest.mark.parametrize("fields", [{}, {"canaries": 0, "canary_counts": "", "canary_guesses": 0},
                                    {"epsilon": math.inf, "epsilon_delta": 1e-5},
                                    {"epsilon": math.nan, "epsilon_delta": math.nan},
                                    {"canary_classes": 0}, {"canary_counts": ""}, {"epsilon_lower_delta": math.nan}])
def test_records_an_audit_writes_still_read(fields):
    """What vflpriv writes (no canaries, no claim, an infinite claim, an older record without counts or classes)."""
    record = _record(0, **fields)
    assert RunRecord.from_json(record.to_json()).key == record.key


@pytest.mark.parametrize("command", ["table", "report"])
def test_table_and_report_leave_an_edited_record_out_with_one_line(command, tmp_path):
    """Every guess of seed 0 edited to right (and more): no bound from it, the other seeds' rows as before."""
    store = tmp_path / "r.sqlite"
    with Store(store) as s:
        s.put_many([_record(seed) for seed in range(3)])
    with sqlite3.connect(store) as db:
        key, text = db.execute("SELECT key, record FROM runs WHERE key = 'gc-0'").fetchone()
        edited = json.loads(text) | {"canary_counts": json.dumps([[25, 30], [13, 13], [7, 7], [3, 3]])}
        db.execute("UPDATE runs SET record = ? WHERE key = ?", (json.dumps(edited), key))
    result = CliRunner().invoke(app, [command, str(store), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert "warning: damaged record left out: run gc-0: canary_counts" in result.output
    table = pd.read_csv(tmp_path / "o" / "epsilon_table.csv")
    gc = table[table["attack"] == "gc"].iloc[0]
    assert gc["canaries"] == 50 and gc["epsilon_lower"] == 0.0  # seeds 1 and 2 only, 6 of 50 right


#: Edits just past a field's valid range, and the field the reason must start with (the first check that fails).
EDGES = {
    "canaries -1": ({"canaries": -1}, "canaries is -1"),
    "classes -1": ({"canary_classes": -1}, "canary_classes is -1"),
    "a claim just below 0": ({"epsilon": -0.5}, "epsilon is -0.5"),
    "a bound just below 0": ({"auditor_epsilon_fdp": -1e-9}, "auditor_epsilon_fdp is -1e-09"),
    "a delta just above 1": ({"epsilon_delta": 1.5}, "epsilon_delta is 1.5"),
    "a right count of -1": ({"canary_counts": json.dumps([[25, -1]])},
                            r"canary_counts entry \[25, -1\] is impossible with 25 canaries \(need 0 <= right <= "
                            r"guesses <= canaries\)$"),
    "guesses -1": ({"canary_guesses": -1}, "canary_guesses is -1"),
    "the auditor's guesses above the canaries": ({"auditor": "gradient-lrt", "auditor_guesses": 30},
                                                 r"auditor_guesses is 30, outside 0\.\.25"),
}


@pytest.mark.parametrize("edit", list(EDGES))
def test_a_field_just_past_its_range_is_the_one_named(edit):
    fields, reason = EDGES[edit]
    with pytest.raises(ValueError, match=rf"^{reason}"):
        RunRecord.from_json(json.dumps(json.loads(_record(0).to_json()) | fields))


@pytest.mark.parametrize("fields", [{"canary_counts": json.dumps([[25, 0], [13, 13], [7, 7]])},
                                    {"canary_guesses": 0, "canary_counts": ""}, {"canary_classes": 2},
                                    {"epsilon_delta": 0.0, "epsilon_lower_delta": 1.0}, {"epsilon": 0.0}])
def test_records_at_the_ends_of_each_range_still_read(fields):
    """No right guess, every kept guess right, no guess at all, two classes, delta 0 and 1, a claim of 0."""
    record = _record(0, **fields)
    assert RunRecord.from_json(record.to_json()).to_json() == record.to_json()


def test_a_record_written_before_the_canary_fields_still_reads():
    """A record without any canary or claim field (an older vflpriv's): their defaults are no canaries, no claim."""
    data = json.loads(_record(0).to_json())
    for name in ("canaries", "canary_guesses", "canary_classes", "canary_counts", "auditor_counts", "auditor_guesses",
                 "epsilon", "epsilon_delta", "epsilon_lower", "epsilon_lower_delta", "epsilon_fdp"):
        data.pop(name, None)
    assert RunRecord.from_json(json.dumps(data)).canaries == 0


def test_a_record_without_its_canaries_field_has_none_so_its_guesses_are_impossible():
    """An absent field takes the record's default (no canaries): a record that lost its canaries but says 1 guess is
    damaged, as it would be with canaries 0 written out."""
    data = json.loads(_record(0, canary_counts="").to_json()) | {"canary_guesses": 1}
    data.pop("canaries")
    with pytest.raises(ValueError, match=r"^canary_guesses is 1, outside 0\.\.0"):
        RunRecord.from_json(json.dumps(data))
