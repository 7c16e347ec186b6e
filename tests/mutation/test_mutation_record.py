"""scripts/mutation_record.py: each outcome counted apart (a timeout or a mutant that does not compile is no kill), the
score leaves them out, and an equivalent holds only for the function source its reason was written for."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import mutation_record as record  # noqa: E402

SOURCE = '''"""A module."""

LIMIT = 3


def f(x, *, y=1):
    if x < LIMIT:
        return x + y
    return 0


class C:
    size = 2

    def g(self):
        return self.size * 2
'''


def _job(line: int) -> dict:
    return {"job_id": "j", "mutations": [{"module_path": "m.py", "start_pos": [line, 4], "operator_name": "op",
                                          "occurrence": 0}]}


def _mutated(line: int, new: str) -> str:
    lines = SOURCE.splitlines()
    lines[line - 1] = new
    return "\n".join(lines) + "\n"


def test_the_scope_of_a_line_is_its_innermost_function_or_the_statement_at_module_level():
    assert record.scope(SOURCE, 8)[0] == "f" and record.scope(SOURCE, 16)[0] == "C.g"
    assert record.scope(SOURCE, 3)[0] == "<module>" and record.scope(SOURCE, 13)[0] == "C"
    assert record.scope(SOURCE, 8) == record.scope(SOURCE, 6)  # one function, one digest


def test_a_function_s_digest_moves_with_any_line_of_it_and_no_other_function_s():
    name, before = record.scope(SOURCE, 8)
    changed = SOURCE.replace("return 0", "return -1")
    assert record.scope(changed, 8)[0] == name and record.scope(changed, 8)[1] != before
    assert record.scope(SOURCE.replace("* 2", "* 3"), 8)[1] == before
    assert record.scope("\n\n" + SOURCE, 10)[1] == before  # moved down two lines, unchanged: still stamped


@pytest.mark.parametrize("result, outcome", [
    ({"worker_outcome": "normal", "test_outcome": "killed", "output": "1 failed"}, "killed"),
    ({"worker_outcome": "normal", "test_outcome": "killed", "output": "timeout"}, "timeout"),
    ({"worker_outcome": "normal", "test_outcome": "survived", "output": ""}, "survived"),
    ({"worker_outcome": "exception", "test_outcome": "incompetent", "output": "Traceback\nOSError: x"}, "error"),
    (None, "not run"),
])
def test_each_outcome_is_its_own(result, outcome):
    row = record.classify(_job(8), result, SOURCE, _mutated(8, "        return x - y"), {})
    assert row.outcome == outcome and row.function == "f" and row.mutant == "return x - y"
    assert row.original == "return x + y"


def test_a_mutant_that_does_not_compile_is_not_a_kill_even_when_its_tests_failed():
    broken = _mutated(7, "    if x < LIMIT")
    for result in ({"worker_outcome": "normal", "test_outcome": "killed", "output": "SyntaxError"},
                   {"worker_outcome": "skipped", "output": f"{record.NOT_COMPILING}: expected ':'"}, None):
        assert record.classify(_job(7), result, SOURCE, broken, {}).outcome == "non-compiling"


def test_a_job_a_filter_skipped_is_out_of_the_record():
    assert record.classify(_job(8), {"worker_outcome": "skipped", "output": None}, SOURCE,
                           _mutated(8, "        return x - y"), {}) is None


def test_an_equivalent_holds_for_the_function_source_it_was_written_for_and_is_stale_after_it_changes():
    survived = {"worker_outcome": "normal", "test_outcome": "survived", "output": ""}
    stamp = record.scope(SOURCE, 8)[1]
    key = ("m.py", "f", "return x - y")
    equivalent = {key: record.Equivalent("a reason", stamp)}
    assert record.classify(_job(8), survived, SOURCE, _mutated(8, "        return x - y"), equivalent).outcome \
        == "equivalent"
    changed = SOURCE.replace("return 0", "return 1")
    mutant = _mutated(8, "        return x - y").replace("return 0", "return 1")
    stale = record.classify(_job(8), survived, changed, mutant, equivalent)
    assert stale.outcome == "stale" and "re-check" in stale.note
    assert record.classify(_job(8), survived, SOURCE, _mutated(8, "        return x - y"),
                           {key: record.Equivalent("a reason", "")}).outcome == "stale"  # never stamped
    assert record.classify(_job(8), survived, SOURCE, _mutated(8, "        return x - y"),
                           {("m.py", "g", "return x - y"): record.Equivalent("a reason", stamp)}).outcome == "survived"


def test_the_score_leaves_out_equivalents_non_compiling_timeouts_and_errors_and_counts_stale_ones_as_survivors():
    outcomes = ["killed"] * 6 + ["survived", "stale", "equivalent", "equivalent", "non-compiling", "timeout",
                                 "timeout", "error", "not run"]
    rows = [record.Mutant("m.py", 1, "f", "a", "b", o) for o in outcomes]
    c = record.counts(rows)
    assert c["mutants"] == 14 and c["not run"] == 1 and c["timeout"] == 2
    assert record.score(c) == pytest.approx(6 / (14 - 2 - 1 - 2 - 1))
    assert record.score(record.counts([record.Mutant("m.py", 1, "f", "a", "b", "equivalent")])) is None
    section = "\n".join(record.details("m.py", rows))
    for title in ("Surviving (1)", "Stale equivalents (re-check) (1)", "Timeouts (2)", "Not compiling (1)",
                  "Errors (1)", "Equivalent (2)"):
        assert title in section
