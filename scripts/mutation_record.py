"""The mutation record: each mutant's outcome, the equivalents keyed by their function's source, the Markdown record.

Outcomes, each counted apart: ``killed`` (a test failed), ``survived`` (every test passed, no equivalence argued),
``equivalent`` (named in ``scripts/mutation_equivalents.toml`` with the reason no test can tell it from the original,
for its function as it is now), ``stale`` (named there, but its function's source changed since the reason was
written: to be re-checked, and counted as a survivor until it is), ``timeout`` (its tests ran past the limit),
``non-compiling`` (the mutated module is not valid Python), ``error`` (cosmic-ray could not apply or run it) and
``not run`` (the session has not reached it). The score is killed / (mutants - equivalent - non-compiling - timeouts -
errors): a timeout or a syntax error is no test's merit.

An equivalent is keyed by module, the qualified name of the function the mutant is in (``<module>`` for a module-level
statement) and the mutant's line, and holds ``source``: a digest of that function's source when its reason was
written. A change anywhere in the function (its line included) makes the entry stale until someone re-checks the
reason and stamps it again (``scripts/mutation.py --stamp``).
"""

from __future__ import annotations

import ast
import hashlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

OUTCOMES = ("killed", "survived", "equivalent", "stale", "timeout", "non-compiling", "error", "not run")
#: What ``scripts/mutation.py`` writes as the output of a mutant it did not run because it does not compile.
NOT_COMPILING = "does not compile"
MODULE_SCOPE = "<module>"


@dataclass(frozen=True)
class Equivalent:
    reason: str
    source: str  # the digest of the function's source the reason was written for ('' if never stamped)


@dataclass(frozen=True)
class Mutant:
    """One mutant as the record lists it."""

    module: str
    line: int
    function: str
    original: str
    mutant: str
    outcome: str
    note: str = ""  # the equivalence's reason, or what made it stale, time out or fail to compile


def scope(source: str, line: int) -> tuple[str, str]:
    """(qualified name, source digest) of the innermost function of ``source`` holding ``line`` (or, outside every
    function, of the class holding it; else ``<module>`` and the module-level statement holding it)."""
    name, node, nodes, prefix = MODULE_SCOPE, None, ast.parse(source).body, ""
    while True:
        inside = next((n for n in nodes if n.lineno <= line <= n.end_lineno), None)
        if inside is None:
            break
        if isinstance(inside, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name, node, prefix = f"{prefix}{inside.name}", inside, f"{prefix}{inside.name}."
            nodes = inside.body
            continue
        if node is None:
            node = inside  # a module-level statement
        break
    return name, digest(ast.get_source_segment(source, node) or "" if node is not None else "")


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def load_equivalents(path: Path) -> dict[tuple[str, str, str], Equivalent]:
    """(module, function, mutant line) -> its reason and the source digest it was written for."""
    if not path.exists():
        return {}
    return {(e["module"], e.get("function", ""), e["mutant"]): Equivalent(e["reason"], e.get("source", ""))
            for e in tomllib.loads(path.read_text()).get("equivalent", [])}


def classify(job: dict, result: dict | None, original: str, mutated: str | None,
             equivalents: dict[tuple[str, str, str], Equivalent]) -> Mutant | None:
    """The record's view of one cosmic-ray job (its ``dump`` line) given the module's source and the mutated source
    (None where the mutation cannot be applied); None for a job a filter skipped (out of scope)."""
    (m,) = job["mutations"]
    line = m["start_pos"][0]
    function, now = scope(original, line)
    before = original.splitlines()[line - 1].strip()
    after = mutated.splitlines()[line - 1].strip() if mutated is not None else ""
    row = dict(module=m["module_path"], line=line, function=function, original=before, mutant=after)
    output = (result or {}).get("output") or ""
    if result is not None and result.get("worker_outcome") == "skipped" and not output.startswith(NOT_COMPILING):
        return None
    if mutated is None:
        return Mutant(**row, outcome="error", note="cosmic-ray could not apply it")
    try:
        compile(mutated, m["module_path"], "exec")
    except SyntaxError as exc:
        return Mutant(**row, outcome="non-compiling", note=f"{NOT_COMPILING}: {exc.msg}")
    if result is None:
        return Mutant(**row, outcome="not run")
    if result.get("worker_outcome") not in (None, "normal") or result.get("test_outcome") == "incompetent":
        return Mutant(**row, outcome="error", note=output.strip().splitlines()[-1][:120] if output.strip() else "")
    if result.get("test_outcome") == "killed":
        return Mutant(**row, outcome="timeout" if output == "timeout" else "killed")
    known = equivalents.get((row["module"], function, after))
    if known is None:
        return Mutant(**row, outcome="survived")
    if known.source != now:
        return Mutant(**row, outcome="stale", note=f"{known.reason} (argued for source {known.source or 'unstamped'}; "
                                                   f"the function is {now} now: re-check)")
    return Mutant(**row, outcome="equivalent", note=known.reason)


def counts(mutants: list[Mutant]) -> dict[str, int]:
    found = {o: 0 for o in OUTCOMES}
    for m in mutants:
        found[m.outcome] += 1
    found["mutants"] = sum(found[o] for o in OUTCOMES if o != "not run")
    return found


def score(c: dict[str, int]) -> float | None:
    """killed / (mutants - equivalent - non-compiling - timeouts - errors), None when nothing is left to score."""
    scored = c["mutants"] - c["equivalent"] - c["non-compiling"] - c["timeout"] - c["error"]
    return c["killed"] / scored if scored else None


COLUMNS = ["mutants", "killed", "survived", "stale", "equivalent", "non-compiling", "timeout", "error", "not run"]


def table_row(group: str, module: str, c: dict[str, int]) -> str:
    s = score(c)
    return "| " + " | ".join([group, module, *(str(c[k]) for k in COLUMNS), f"{s:.1%}" if s is not None else "n/a"]) + " |"


def details(module: str, mutants: list[Mutant]) -> list[str]:
    """A module's section: its survivors, stale equivalents, timeouts, non-compiling and equivalent mutants, apart."""
    out = [f"\n### {module}\n"]
    for outcome, title in [("survived", "Surviving"), ("stale", "Stale equivalents (re-check)"), ("timeout", "Timeouts"),
                           ("non-compiling", "Not compiling"), ("error", "Errors"), ("equivalent", "Equivalent")]:
        rows = [m for m in mutants if m.outcome == outcome]
        if not rows:
            continue
        out += [f"{title} ({len(rows)}):\n", "| where | function | line | mutant | note |", "| --- | --- | --- | --- | --- |"]
        out += [f"| {m.module}:{m.line} | {m.function} | `{_cell(m.original)}` | `{_cell(m.mutant)}` | {_cell(m.note, 400)} |"
                for m in sorted(rows, key=lambda m: m.line)]
        out.append("")
    return out


def _cell(text: str, width: int = 80) -> str:
    return re.sub(r"\|", "\\|", text[:width]).replace("`", "'")
