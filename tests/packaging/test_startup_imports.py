"""What a command and a sweep's worker import before any work: scipy.stats (about 0.9 CPU s of the 3 a worker spent
importing the runner) only where a p-value or a leakage test is computed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from vflpriv.common.lazy import Lazy


@pytest.mark.parametrize("module", ["vflpriv.runner.execution", "vflpriv.cli"])
def test_the_runner_and_the_command_line_import_no_scipy_stats(module):
    code = f"import sys, {module}; print('scipy.stats' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_lazy_module_is_the_module_once_used():
    binom = Lazy("scipy.stats", "binom")
    from scipy.stats import binom as real

    assert binom.sf(2, 10, 0.5) == real.sf(2, 10, 0.5)
    assert Lazy("math").pi == 3.141592653589793
