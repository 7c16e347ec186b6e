"""Mutation testing of the code behind vflpriv's published numbers, with cosmic-ray (the ``mutation`` extra and
vflpriv's operator plugin).

    git worktree add /tmp/vflpriv-mutation HEAD && cd /tmp/vflpriv-mutation
    python -m venv .venv
    .venv/bin/pip install -c constraints.txt -e '.[dev,search,mutation]' -e scripts/mutation_operators
    nice -n 19 .venv/bin/python scripts/mutation.py --groups metrics --record benchmarks/results/mutation/all.md

Cosmic-ray changes one source file at a time on disk, runs the module's tests (``-x``: the first failure kills the
mutant) and restores the file; so it runs only in a clean git checkout of its own (it refuses a dirty tree), and an
interrupted run resumes from its sessions in ``--work``. Groups and modules run one after another; ``--groups`` and
``--modules`` pick some (two worktrees can run two at once). What is mutated, with which tests and operators:
``scripts/mutation_scope.py``; the outcomes, the score and the equivalents' keys: ``scripts/mutation_record.py``. A
mutant that does not compile is recorded as such and not run. ``--report-only`` records what the sessions hold without
running anything: a module whose session is missing or out of date (its source changed since) is "not measured", with
the command that measures it. ``--retest-only`` runs no pending mutant of an existing session, only its survivors
against the tests as they are (a kill counts only under the tests' digest it was found with, so after new tests every
survivor of the first pass is rerun). ``--stamp`` writes, for each equivalent of ``scripts/mutation_equivalents.toml``
without a ``source``, its function and that function's source digest (after its reason was checked against the code as
it is).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import mutation_record as record
from mutation_scope import GROUPS, KEPT, STRING_OPERATOR, Group, lines

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENTS = ROOT / "scripts" / "mutation_equivalents.toml"
#: cosmic-ray's commands, installed beside this interpreter by the ``mutation`` extra.
BIN = Path(sys.executable).parent


def _run(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True, cwd=ROOT).stdout


def _tests(group: Group, module: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *group.tests[module]]


def _config(session: str, module: str, group: Group, work: Path, timeout: float) -> Path:
    kept = "|".join(KEPT)
    text = "\n".join([
        "[cosmic-ray]",
        f"module-path = {json.dumps(module)}",
        f"timeout = {timeout}",
        "excluded-modules = []",
        f"test-command = {json.dumps(' '.join(shlex.quote(a) for a in _tests(group, module)))}",
        "[cosmic-ray.distributor]",
        'name = "local"',
        "[cosmic-ray.filters.operators-filter]",
        f"exclude-operators = [{json.dumps(f'core/(?!({kept})$)')}]",
        "[cosmic-ray.filters.line-filter]",
        f"lines = {{{json.dumps(module)} = {json.dumps(lines(ROOT, module, group.functions.get(module, [])))}}}",
        "",
    ])
    path = work / f"{session}.toml"
    path.write_text(text)
    return path


def _clean() -> None:
    dirty = _run("git", "status", "--porcelain", "--untracked-files=no").strip()
    if dirty:
        sys.exit(f"error: the checkout has changes ({dirty.splitlines()[0]} ...): cosmic-ray mutates files in place; "
                 "run it in a clean worktree of its own (see the module's docstring)")


def _operators_installed() -> None:
    listed = _run(str(BIN / "cosmic-ray"), "operators").split()
    if STRING_OPERATOR not in listed:
        sys.exit(f"error: cosmic-ray lacks the operator {STRING_OPERATOR}: pip install -e scripts/mutation_operators "
                 "(vflpriv's operator plugin) beside the 'mutation' extra")


def mutated(module: str, mutation: dict) -> str | None:
    """The module's source with ``mutation`` applied (in memory), or None where it does not apply."""
    from cosmic_ray.mutating import mutate_code
    from cosmic_ray.plugins import get_operator

    operator = get_operator(mutation["operator_name"])(**(mutation.get("operator_args") or {}))
    return mutate_code((ROOT / module).read_text(), operator, mutation["occurrence"])


def _skip_not_compiling(db: Path, module: str) -> None:
    """Record every pending mutant whose module does not compile as such, so that ``exec`` does not run it."""
    from cosmic_ray.work_db import use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(db)) as work_db:
        for item in list(work_db.pending_work_items):
            code = mutated(module, _spec(item.mutations[0]))
            try:
                compile(code or "", module, "exec")
            except SyntaxError as exc:
                work_db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED,
                                                           output=f"{record.NOT_COMPILING}: {exc.msg}"))


def _spec(spec) -> dict:
    return {"operator_name": spec.operator_name, "occurrence": spec.occurrence, "operator_args": spec.operator_args}


def _retest(db: Path, jobs: list[list], group: Group, module: str, timeout: float, *, run: bool = True) -> list[list]:
    """Each stage-1 survivor run again against the module's tests as they are now (tests only grow: a mutant they
    killed stays killed), the mutated source written and the file restored after; results kept per tests' digest in
    ``<session>.retest.json``. Without ``run``, only the kept results are read."""
    state_path = db.with_suffix(".retest.json")
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    tests = record.digest("".join((ROOT / t).read_text() for t in [*group.tests[module], "tests/conftest.py"]
                                  if t.startswith("tests/")))
    for job, result in jobs:
        if not result or result.get("test_outcome") != "survived":
            continue
        found = state.get(job["job_id"], {})
        if found.get("tests") != tests and not run:
            continue
        if found.get("tests") != tests:
            path = ROOT / module
            original = path.read_bytes()
            try:
                path.write_text(mutated(module, job["mutations"][0]))
                try:
                    done = subprocess.run(_tests(group, module), cwd=ROOT, capture_output=True, timeout=timeout)
                    outcome, output = ("survived" if done.returncode == 0 else "killed"), ""
                except subprocess.TimeoutExpired:
                    outcome, output = "killed", "timeout"
            finally:
                path.write_bytes(original)
            state[job["job_id"]] = found = {"tests": tests, "outcome": outcome, "output": output}
            state_path.write_text(json.dumps(state, indent=1))
        if found["outcome"] == "killed":
            result.update(test_outcome="killed", output=found.get("output", ""))
    return jobs


def run_module(name: str, group: Group, module: str, work: Path, timeout: float, *,
               execute: bool = True, pending: bool = True) -> list[list] | None:
    """Init (or resume) the module's session, filter it, execute it, retest its survivors: every mutant's job and
    result. A session whose module, or what of it is mutated, changed since it was made is made again. Without
    ``execute``, what the session holds now (None for a module never run, or changed since); without ``pending``, a
    fresh session's pending mutants are left for later and only its survivors are retested (a sampled session's
    survivors, or a retest after new tests, without waiting for the rest)."""
    session = f"{name}-{Path(module).stem}"
    config, db = _config(session, module, group, work, timeout), work / f"{session}.sqlite"
    stamp = db.with_suffix(".module")
    scope = json.dumps([lines(ROOT, module, group.functions.get(module, [])), KEPT, STRING_OPERATOR])
    current = record.digest((ROOT / module).read_text() + scope)  # the module, and what of it is mutated how
    fresh = db.exists() and stamp.exists() and stamp.read_text() == current
    if not execute:
        if not fresh:
            return None
        dumped = _run(str(BIN / "cosmic-ray"), "dump", str(db)).splitlines()
        return _retest(db, [json.loads(line) for line in dumped], group, module, timeout, run=False)
    if db.exists() and not fresh:
        for stale in (db, db.with_suffix(".retest.json")):
            stale.unlink(missing_ok=True)
    if not db.exists():
        _run(str(BIN / "cosmic-ray"), "init", str(config), str(db))
        _run(str(BIN / "cr-filter-operators"), str(db), str(config))
        _run(str(BIN / "cr-filter-lines"), "--config", str(config), str(db))
        _skip_not_compiling(db, module)
        stamp.write_text(current)
    start = time.time()
    if pending or not fresh:
        subprocess.run([str(BIN / "cosmic-ray"), "exec", str(config), str(db)], check=True, cwd=ROOT)
    found = _retest(db, [json.loads(line) for line in _run(str(BIN / "cosmic-ray"), "dump", str(db)).splitlines()],
                    group, module, timeout)
    print(f"{session}: {time.time() - start:.0f} s", flush=True)
    _clean()  # every file restored
    return found


def mutants(module: str, jobs: list[list], equivalents: dict) -> list[record.Mutant]:
    original = (ROOT / module).read_text()
    rows = (record.classify(job, result, original, mutated(module, job["mutations"][0]), equivalents)
            for job, result in jobs)
    return [r for r in rows if r is not None]


def stamp(found: dict[str, list[record.Mutant]]) -> int:
    """Write function and source into each equivalent entry lacking a source whose mutant the sessions hold (the
    file's comments and order kept); the number stamped."""
    text = EQUIVALENTS.read_text()
    blocks = text.split("[[equivalent]]")
    done = 0
    for i, block in enumerate(blocks[1:], 1):
        entry = tomllib.loads("[[equivalent]]" + block)["equivalent"][0]
        if entry.get("source"):
            continue
        match = next((m for m in found.get(entry["module"], []) if m.mutant == entry["mutant"]
                      and entry.get("function", m.function) == m.function), None)
        if match is None:
            continue
        digest = record.scope((ROOT / match.module).read_text(), match.line)[1]
        head, _, rest = block.partition("\nreason = ")
        head = "\n".join(line for line in head.split("\n") if not line.startswith("function = "))
        blocks[i] = f"{head}\nfunction = {json.dumps(match.function)}\nsource = \"{digest}\"\nreason = {rest}"
        done += 1
    EQUIVALENTS.write_text("[[equivalent]]".join(blocks))
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", default=",".join(GROUPS), help=f"comma-separated, of {', '.join(GROUPS)}")
    parser.add_argument("--modules", default="", help="comma-separated module paths of those groups (default: all)")
    parser.add_argument("--work", type=Path, default=ROOT / ".mutation", help="sessions and configs (resumable)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant's tests")
    parser.add_argument("--record", type=Path, help="write the Markdown record here")
    parser.add_argument("--report-only", action="store_true", help="run nothing: record what the sessions hold now")
    parser.add_argument("--retest-only", action="store_true",
                        help="run no pending mutant of an existing session: only retest its survivors")
    parser.add_argument("--stamp", action="store_true", help="stamp the unstamped equivalents the sessions hold")
    args = parser.parse_args()
    names = args.groups.split(",")
    unknown = [n for n in names if n not in GROUPS]
    if unknown:
        sys.exit(f"error: unknown group(s) {', '.join(unknown)}; valid: {', '.join(GROUPS)}")
    chosen = [m for m in args.modules.split(",") if m]
    scoped = [m for n in names for m in GROUPS[n].modules]
    if set(chosen) - set(scoped):
        sys.exit(f"error: module(s) {', '.join(sorted(set(chosen) - set(scoped)))} are not in the groups "
                 f"{', '.join(names)}; valid: {', '.join(scoped)}")
    _clean()
    _operators_installed()
    args.work.mkdir(parents=True, exist_ok=True)
    commit = _run("git", "rev-parse", "--short", "HEAD").strip()
    equivalents = record.load_equivalents(EQUIVALENTS)
    table = ["| group | module | " + " | ".join(record.COLUMNS) + " | score |",
             "|" + " --- |" * (len(record.COLUMNS) + 3)]
    details, unmeasured, found, total = [], [], {}, []
    for name, group in GROUPS.items():  # the record covers the whole scope; only the chosen modules run
        for module in group.modules:
            execute = not args.report_only and name in names and (not chosen or module in chosen)
            jobs = run_module(name, group, module, args.work, args.timeout, execute=execute,
                              pending=not args.retest_only)
            if jobs is None:
                unmeasured.append(f"| {name} | {module} | `python scripts/mutation.py --groups {name} --modules "
                                  f"{module}` |")
                continue
            found[module] = rows = mutants(module, jobs, equivalents)
            total += rows
            table.append(record.table_row(name, module, record.counts(rows)))
            print(table[-1], flush=True)
            details += record.details(module, rows)
    if args.stamp:
        print(f"stamped {stamp(found)} equivalent(s)", flush=True)
    if args.record:
        table.append(record.table_row("**all**", f"{len(found)} modules measured", record.counts(total)))
        args.record.write_text("\n".join([
            f"# Mutation testing at {commit}\n",
            f"`python scripts/mutation.py --record {args.record}` with `--groups` and `--modules` as each module's "
            f"command below says (cosmic-ray; operators: {', '.join(KEPT)}, and {STRING_OPERATOR}).",
            "Score: killed / (mutants - equivalent - non-compiling - timeout - error); a stale equivalent (its function "
            "changed since its reason was written) counts as a survivor until it is re-checked. 'not run': mutants the "
            "session has not reached yet. Every mutant that is not killed is listed in its module's section.\n",
            *table, "", "Not measured at this commit (no session, or its module changed since):\n",
            "| group | module | command |", "| --- | --- | --- |", *unmeasured, *details, ""]))


if __name__ == "__main__":
    main()
