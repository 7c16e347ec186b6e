"""``benchmarks/suite_durations.py``: ``run`` ends with pytest's exit code when pytest ran no tests (no traceback),
and ``compare`` refuses a junit file whose times no test can take (nan, inf, negative)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "suite_durations.py"
JUNIT = '<testsuites><testsuite><testcase classname="tests.a" name="test_x" time="{}"/></testsuite></testsuites>'


def test_run_with_no_tests_exits_with_pytest_s_code_and_no_traceback(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "run", "o.xml"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 5, done.stdout + done.stderr  # pytest's "no tests collected"
    assert "Traceback" not in done.stderr and "no timings" in done.stdout


@pytest.mark.parametrize("time", ["nan", "inf", "-5"])
def test_compare_refuses_times_no_test_takes(time, tmp_path):
    good, bad = tmp_path / "good.xml", tmp_path / "bad.xml"
    good.write_text(JUNIT.format("1.5"))
    bad.write_text(JUNIT.format(time))
    done = subprocess.run([sys.executable, str(SCRIPT), "compare", str(good), str(bad)], capture_output=True,
                          text=True)
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert done.stderr.startswith(f"error: {bad} is no junit file (tests.a::test_x took time='{time}'")
    assert len(done.stderr.splitlines()) == 1
