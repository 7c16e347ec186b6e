"""What a command and a sweep's worker import before any work: scipy.stats (about 0.9 CPU s of the 3 a worker spent
importing the runner) only where a p-value or a leakage test is computed; the command line nothing heavy before a
command runs (its workers are spawned first and import torch while it does); the README's main command neither
scikit-learn (its digits are read from scikit-learn's file), seaborn nor scipy."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from vflpriv.common.lazy import Lazy


@pytest.mark.parametrize("module", ["vflpriv.runner.execution", "vflpriv.cli"])
def test_the_runner_and_the_command_line_import_no_scipy_stats(module):
    code = f"import sys, {module}; print('scipy.stats' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


#: What the command line leaves to the command: each costs tenths of a CPU second to a second to import.
HEAVY = ("torch", "numpy", "pandas", "matplotlib", "scipy", "sklearn", "seaborn", "joblib")


def test_the_command_line_imports_nothing_heavy_before_a_command_runs():
    code = f"import sys, vflpriv.cli; print(' '.join(m for m in {HEAVY!r} if m in sys.modules) or 'none')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "none"


def test_the_main_command_imports_no_scikit_learn_seaborn_or_scipy_and_its_trainings_no_pandas(tmp_path):
    """The README's ``vflpriv evaluate`` (here one seed and strength, short), cold, in one process: first one of its
    trainings as a worker runs it (what that imported), then the command (what it imported by its end)."""
    code = """
import sys
from vflpriv.cli import app
from vflpriv.cli.evaluate import build_experiment
from vflpriv.runner.execution import run_safely
from vflpriv.tradeoff import executors

args = ['--method', 'fedhssl', '--attack', 'mc', '--defense', 'iso', '--seeds', '0', '--strengths', '5', '--set',
        'method.options.global_iterations=1', '--set', 'finetune.epochs=2', '--set', 'attack.prior_epochs=20']
options = dict(config=None, method='fedhssl', attack='mc', defense='iso', dataset=None, strengths='5', seeds='0',
               phase=None, jobs=None, backend=None, device=None, overrides=args[-5::2])
(record,) = run_safely(build_experiment(**options).runs())
assert record.status == 'ok', record.error
print('training:', ' '.join(m for m in ('pandas', 'scipy', 'sklearn') if m in sys.modules) or 'none')
sys.argv = ['vflpriv', 'evaluate', *args, '--jobs', '1', '--quiet', '--out', sys.argv[1]]
try:
    app()
except SystemExit as exc:
    assert not exc.code, exc.code
print('command:', ' '.join(m for m in ('sklearn', 'seaborn', 'scipy') if m in sys.modules) or 'none')
"""
    env = {**os.environ, "VFLPRIV_CACHE": str(tmp_path / "cold")}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "out")], capture_output=True, text=True,
                         check=True, env=env).stdout.splitlines()
    assert [line for line in out if line.startswith(("training:", "command:"))] == ["training: none", "command: none"]
    assert (tmp_path / "out" / "tradeoff.png").is_file()


def test_the_main_command_plans_and_prints_its_header_without_pandas(tmp_path):
    """Everything the parent does before its first training (planning every training, the header's lines: a dry run
    does just that) imports no pandas (0.2-0.5 s on that path; the report imports it while the last trainings run)."""
    code = """
import sys
from vflpriv.cli import app
sys.argv = ['vflpriv', 'evaluate', '--method', 'fedhssl', '--attack', 'mc', '--defense', 'iso', '--dry-run',
            '--out', sys.argv[1]]
try:
    app()
except SystemExit as exc:
    assert not exc.code, exc.code
print('pandas' in sys.modules)
"""
    env = {**os.environ, "VFLPRIV_CACHE": str(tmp_path / "cold")}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "out")], capture_output=True, text=True,
                         check=True, env=env).stdout.splitlines()
    assert out[-1] == "False"


def test_the_audit_imports_its_report_only_after_planning(tmp_path):
    """The audit's report modules (and pandas with them) are imported while the last trainings run (``prepare``), not
    before the first: a dry run, which plans every run and stops there, imports none of them."""
    code = """
import sys
from vflpriv.cli import app
sys.argv = ['vflpriv', 'audit', '--method', 'splitnn', '--attacks', 'mc', '--defenses', 'iso', '--seeds', '0',
            '--canaries', '0', '--dry-run', '--out', sys.argv[1]]
try:
    app()
except SystemExit as exc:
    assert not exc.code, exc.code
print(' '.join(m for m in ('pandas', 'vflpriv.reports.audit', 'vflpriv.reports.features') if m in sys.modules) or 'none')
"""
    env = {**os.environ, "VFLPRIV_CACHE": str(tmp_path / "cold")}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "out")], capture_output=True, text=True,
                         check=True, env=env).stdout.splitlines()
    assert out[-1] == "none"


def test_a_lazy_module_is_the_module_once_used():
    binom = Lazy("scipy.stats", "binom")
    from scipy.stats import binom as real

    assert binom.sf(2, 10, 0.5) == real.sf(2, 10, 0.5)
    assert Lazy("math").pi == 3.141592653589793
