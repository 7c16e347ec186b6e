"""Mutation testing of the code behind vflpriv's published numbers, with cosmic-ray (the ``mutation`` extra).

    git worktree add /tmp/vflpriv-mutation HEAD && cd /tmp/vflpriv-mutation
    python -m venv .venv && .venv/bin/pip install -c constraints.txt -e '.[dev,search,mutation]'
    .venv/bin/python scripts/mutation.py --record benchmarks/results/mutation.md

Cosmic-ray changes one source file at a time on disk, runs the group's tests (``-x``: the first failure kills the
mutant) and restores the file; so it runs only in a clean git checkout of its own (it refuses a dirty tree), and an
interrupted run resumes from its sessions in ``--work``. Groups run one after another; ``--groups`` picks some (two
worktrees can run two groups at once). The operators are a small set in the spirit of mutmut's (one plausible slip
per operator, constant, comparison and loop), in functions and module-level statements (module constants and a
class body's settings are declared settings, left alone: :func:`_ranges`); equivalent mutants (no test can tell
them apart, e.g. ``<`` for ``<=`` on a value that is never equal) are named with their reason in
``scripts/mutation_equivalents.toml`` (by module and the mutant's line) and left out of the score: killed /
(mutants - equivalent). ``--report-only`` records what the sessions hold without running anything (a module whose
session is missing or out of date is "not measured").
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
EQUIVALENTS = ROOT / "scripts" / "mutation_equivalents.toml"
#: cosmic-ray's commands, installed beside this interpreter by the ``mutation`` extra.
BIN = Path(sys.executable).parent

#: The operators kept: one replacement per arithmetic, comparison, boolean and unary operator, every numeric
#: constant, loops that never run, and ``if``/``while`` conditions negated.
KEPT = [
    "ReplaceBinaryOperator_(Add_Sub|Sub_Add|Mul_Div|Div_Mul|Pow_Mul|FloorDiv_Div|Mod_FloorDiv|BitAnd_BitOr|"
    "BitOr_BitAnd)",
    "ReplaceComparisonOperator_(Eq_NotEq|NotEq_Eq|Lt_LtE|LtE_Lt|Gt_GtE|GtE_Gt|Is_IsNot|IsNot_Is)",
    "ReplaceUnaryOperator_(USub_UAdd|Delete_Not)",
    "ReplaceTrueWithFalse", "ReplaceFalseWithTrue", "ReplaceAndWithOr", "ReplaceOrWithAnd", "ReplaceBreakWithContinue",
    "NumberReplacer", "ZeroIterationForLoop", "AddNot",
]


@dataclass(frozen=True)
class Group:
    """Modules mutated one session each, with the tests that must kill their mutants (pytest arguments, fast and
    targeted first: ``-x`` stops at the first failure), and optionally the only functions to mutate."""

    tests: dict[str, list[str]]
    functions: list[str] = field(default_factory=list)

    @property
    def modules(self) -> list[str]:
        return list(self.tests)


CANARIES = "tests/audit/test_canaries.py"
KEY_TESTS = ["tests/core/test_keys.py", "tests/core/test_published_numbers.py", "tests/core/test_config.py"]

GROUPS = {
    "tradeoff": Group({
        "tradeoff/cap.py": ["tests/core/test_cap_tables.py", "tests/core/test_published_numbers.py",
                            "tests/core/test_cap.py"],
        "tradeoff/leakage.py": ["tests/audit/test_leakage_stats.py", "tests/core/test_published_numbers.py"],
        "tradeoff/epsilon.py": ["tests/audit/test_epsilon_pooling.py", CANARIES],
        "vflpriv/common/empirical_epsilon.py": ["tests/audit/test_epsilon_pooling.py", CANARIES,
                                                "tests/attacks/test_scoring_by_hand.py"],
    }),
    "scoring": Group({
        "vflpriv/runner/scoring.py": ["tests/attacks/test_scoring_by_hand.py", "tests/attacks/test_scored_targets.py",
                                      "tests/attacks/test_attack_scoring.py", CANARIES],
        "attacks/search.py": ["tests/attacks/test_scored_targets.py", "tests/attacks/test_attack_search.py"],
    }),
    "prior": Group({"vflpriv/runner/prior.py": ["tests/attacks/test_prior_keys.py",
                                                "tests/attacks/test_scored_targets.py",
                                                "tests/audit/test_own_ssl_prior.py"]}),
    "defenses": Group({
        "defenses/iso.py": ["tests/core/test_iso_defense.py", "tests/core/test_published_numbers.py",
                            "tests/defenses/test_defense_iso_channel.py"],
        "defenses/gaussian_message.py": ["tests/defenses/test_defenses_anchors.py"],
        "defenses/dp_gaussian.py": ["tests/defenses/test_dp_gaussian.py"],
        "defenses/embedding_dp.py": ["tests/defenses/test_embedding_dp.py"],
        "defenses/label_dp.py": ["tests/defenses/test_label_dp_two_stage.py", "tests/defenses/test_defense_label_dp.py",
                                 "tests/defenses/test_defenses_issue36.py"],
    }),
    "engine": Group({
        "vflpriv/engine/channel.py": ["tests/engine/test_channel.py"],
        "vflpriv/data/scenario.py": ["tests/core/test_scenario.py", "tests/core/test_validation_split.py", CANARIES],
        "vflpriv/workflows/conformance.py": ["tests/audit/test_audit.py", "tests/docs/test_plugin_guide.py", "-k",
                                             "conformance or labels_reaching or declared_top"],
    }),
    "keys": Group({"vflpriv/config/keys.py": KEY_TESTS, "vflpriv/config/schema.py": KEY_TESTS},
                  functions=["config_hash", "keyed", "_revision", "key", "training_key"]),
}


def _run(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True, cwd=ROOT).stdout


def _ranges(nodes: list[ast.stmt]) -> list[tuple[int, int]]:
    """Lines of ``nodes`` to mutate: functions and module-level statements whole, except the module's constants
    (``NAME = ...`` in capitals: declared settings such as a head's recipe, as a class body's option defaults, bounds,
    audit strengths and strength axes are; of a class, only its methods are mutated)."""
    found = []
    for node in nodes:
        if isinstance(node, ast.ClassDef):
            found += _ranges([n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                     ast.ClassDef))])
        elif not _constant(node):
            found.append((node.lineno, node.end_lineno))
    return found


def _constant(node: ast.stmt) -> bool:
    """Whether ``node`` declares a module constant: ``NAME = value`` or ``NAME: type = value``, NAME in capitals."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return bool(targets) and all(isinstance(t, ast.Name) and t.id.isupper() for t in targets)


def _lines(module: str, functions: list[str]) -> list[str]:
    """The line ranges to mutate in ``module``: every definition of ``functions`` if given, else :func:`_ranges`."""
    tree = ast.parse((ROOT / module).read_text())
    if functions:
        spans = [(n.lineno, n.end_lineno) for n in ast.walk(tree)
                 if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in functions]
    else:
        spans = _ranges(tree.body)
    return [f"{a}-{b}" for a, b in spans]


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
        f"lines = {{{json.dumps(module)} = {json.dumps(_lines(module, group.functions))}}}",
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


def _digest(paths: list[str]) -> str:
    return hashlib.sha256(b"".join((ROOT / p).read_bytes() for p in paths)).hexdigest()[:16]


def _retest(db: Path, jobs: list[list], group: Group, module: str, timeout: float, *, run: bool = True) -> list[list]:
    """Each stage-1 survivor run again against the group's tests as they are now (tests only grow: a mutant they
    killed stays killed), applied with ``cosmic-ray apply`` and the file restored after; results kept per tests'
    digest in ``<session>.retest.json``. Without ``run``, only the kept results are read."""
    state_path = db.with_suffix(".retest.json")
    state = json.loads(state_path.read_text()) if state_path.exists() else {}
    tests = _digest([*(t for t in group.tests[module] if t.startswith("tests/")), "tests/conftest.py"])
    for job, result in jobs:
        if not result or result.get("test_outcome") != "survived":
            continue
        (m,) = job["mutations"]
        found = state.get(job["job_id"], {})
        if found.get("tests") != tests and not run:
            continue
        if found.get("tests") != tests:
            path = ROOT / m["module_path"]
            original = path.read_bytes()
            try:
                _run(str(BIN / "cosmic-ray"), "apply", m["module_path"], m["operator_name"], str(m["occurrence"]))
                try:
                    done = subprocess.run(_tests(group, module), cwd=ROOT, capture_output=True, timeout=timeout)
                    outcome = "survived" if done.returncode == 0 else "killed"
                except subprocess.TimeoutExpired:
                    outcome = "killed"
            finally:
                path.write_bytes(original)
            state[job["job_id"]] = found = {"tests": tests, "outcome": outcome}
            state_path.write_text(json.dumps(state, indent=1))
        if found["outcome"] == "killed":
            result["test_outcome"] = "killed"
    return jobs


def _tests(group: Group, module: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *group.tests[module]]


def run_group(name: str, group: Group, work: Path, timeout: float, *, execute: bool = True) -> dict[str, list[list]]:
    """Init (or resume) a session per module of the group, filter it, execute it, retest its survivors; every
    mutant's job and result. A session whose module changed since it was made is made again. Without ``execute``,
    what the sessions hold now (a module never run, or changed since, has nothing to report)."""
    jobs: dict[str, list[list]] = {}
    for module in group.modules:
        session = f"{name}-{Path(module).stem}"
        config, db = _config(session, module, group, work, timeout), work / f"{session}.sqlite"
        stamp = db.with_suffix(".module")
        if not execute:
            if db.exists() and stamp.exists() and stamp.read_text() == _digest([module]):
                dumped = _run(str(BIN / "cosmic-ray"), "dump", str(db)).splitlines()
                jobs[module] = _retest(db, [json.loads(line) for line in dumped], group, module, timeout, run=False)
            continue
        if db.exists() and (not stamp.exists() or stamp.read_text() != _digest([module])):
            for stale in (db, db.with_suffix(".retest.json")):
                stale.unlink(missing_ok=True)
        if not db.exists():
            _run(str(BIN / "cosmic-ray"), "init", str(config), str(db))
            _run(str(BIN / "cr-filter-operators"), str(db), str(config))
            _run(str(BIN / "cr-filter-lines"), "--config", str(config), str(db))
            stamp.write_text(_digest([module]))
        start = time.time()
        subprocess.run([str(BIN / "cosmic-ray"), "exec", str(config), str(db)], check=True, cwd=ROOT)
        found = _retest(db, [json.loads(line) for line in _run(str(BIN / "cosmic-ray"), "dump", str(db)).splitlines()],
                        group, module, timeout)
        print(f"{session}: {time.time() - start:.0f} s", flush=True)
        _clean()  # every file restored
        jobs[module] = found
    return jobs


def _equivalents() -> dict[str, str]:
    """'module|mutant line' -> why no test can tell that mutant from the original."""
    if not EQUIVALENTS.exists():
        return {}
    return {f"{e['module']}|{e['mutant']}": e["reason"]
            for e in tomllib.loads(EQUIVALENTS.read_text()).get("equivalent", [])}


def mutant_line(mutation: dict) -> str:
    """The line as the mutant has it (``cosmic-ray apply`` on a scratch copy of the module), stripped."""
    module, line = mutation["module_path"], mutation["start_pos"][0]
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / module
        copy.parent.mkdir(parents=True)
        copy.write_bytes((ROOT / module).read_bytes())
        subprocess.run([str(BIN / "cosmic-ray"), "apply", module, mutation["operator_name"],
                        str(mutation["occurrence"])], cwd=scratch, check=True, capture_output=True)
        return copy.read_text().splitlines()[line - 1].strip()


def summarise(jobs: list[list], equivalents: dict[str, str]) -> tuple[list[str], list[str], dict]:
    """Count each outcome; the survivors as table rows (equivalent ones with their reason)."""
    counts = {"mutants": 0, "killed": 0, "survived": 0, "equivalent": 0, "skipped": 0, "not run": 0}
    survivors, equivalent = [], []
    for job, result in jobs:
        if result is None:
            counts["not run"] += 1
            continue
        if result.get("worker_outcome") == "skipped":
            counts["skipped"] += 1
            continue
        counts["mutants"] += 1
        if result.get("test_outcome") != "survived":
            counts["killed"] += 1  # a failing test, a timeout or a mutant that does not import
            continue
        (m,) = job["mutations"]
        source = (ROOT / m["module_path"]).read_text().splitlines()[m["start_pos"][0] - 1].strip()
        mutant = mutant_line(m)
        row = f"| {m['module_path']}:{m['start_pos'][0]} | `{source[:80]}` | `{mutant[:80]}` |"
        reason = equivalents.get(f"{m['module_path']}|{mutant}")
        if reason:
            counts["equivalent"] += 1
            equivalent.append(f"{row} {reason} |")
        else:
            counts["survived"] += 1
            survivors.append(f"{row} |")
    return survivors, equivalent, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", default=",".join(GROUPS), help=f"comma-separated, of {', '.join(GROUPS)}")
    parser.add_argument("--work", type=Path, default=ROOT / ".mutation", help="sessions and configs (resumable)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant's tests")
    parser.add_argument("--record", type=Path, help="write the Markdown record here")
    parser.add_argument("--report-only", action="store_true", help="run nothing: record what the sessions hold now")
    args = parser.parse_args()
    names = args.groups.split(",")
    unknown = [n for n in names if n not in GROUPS]
    if unknown:
        sys.exit(f"error: unknown group(s) {', '.join(unknown)}; valid: {', '.join(GROUPS)}")
    _clean()
    args.work.mkdir(parents=True, exist_ok=True)
    commit = _run("git", "rev-parse", "--short", "HEAD").strip()
    equivalents = _equivalents()
    table = ["| group | module | mutants | killed | equivalent | survived | not run | score |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    details = []
    for name in names:
        group = GROUPS[name]
        found = run_group(name, group, args.work, args.timeout, execute=not args.report_only)
        for module in group.modules:
            if module not in found:
                table.append(f"| {name} | {module} | not measured | | | | | |")
                continue
            survivors, equivalent, c = summarise(found[module], equivalents)
            scored = c["mutants"] - c["equivalent"]
            score = f"{c['killed'] / scored:.1%}" if scored else "n/a"
            table.append(f"| {name} | {module} | {c['mutants']} | {c['killed']} | {c['equivalent']} | {c['survived']} "
                         f"| {c['not run']} | {score} |")
            print(table[-1], flush=True)
            details += [f"\n### {module}\n", "| where | line | mutant | equivalent because |",
                        "| --- | --- | --- | --- |", *survivors, *equivalent]
    if args.record:
        args.record.write_text("\n".join([
            f"# Mutation testing at {commit}\n",
            f"`python scripts/mutation.py --record {args.record}` (cosmic-ray, operators: {', '.join(KEPT)}).",
            "Score: killed / (mutants run - equivalent); 'not run': mutants the session has not reached yet. Surviving "
            "mutants are listed per module, equivalent ones with their reason.\n", *table, *details, ""]))


if __name__ == "__main__":
    main()
