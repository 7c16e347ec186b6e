"""Issue 48's review, item 4: what ``canary_bound.canaries_needed`` costs for claims at delta > 0, before (b86f636:
the better of Steinke et al.'s and the f-DP test, each at half the level, Steinke et al.'s delta-term cap at every
count) and now (one test chosen by delta, the closed-form pure cap for an early refusal). Binary canaries, delta 1e-5,
5 attacks, the four-entry menu; CPU seconds, old and new interleaved in one process, and their ratio.

    python benchmarks/canaries_needed_speed.py   (in a git checkout that holds b86f636)
"""

from __future__ import annotations

import subprocess
import time
import types
from pathlib import Path

from vflpriv.common import canary_bound as new

OLD = "b86f636"


def old_module() -> types.ModuleType:
    """b86f636's ``canary_bound``, loaded beside the installed one (it imports the same two test modules)."""
    source = subprocess.run(["git", "show", f"{OLD}:vflpriv/common/canary_bound.py"], check=True, capture_output=True,
                            text=True, cwd=Path(__file__).parent).stdout
    module = types.ModuleType("canary_bound_old")
    exec(compile(source, f"{OLD}:canary_bound.py", "exec"), module.__dict__)
    return module


def timed(module: types.ModuleType, claim: float) -> tuple[str, float]:
    start = time.process_time()
    try:
        result = str(module.canaries_needed(claim, classes=2, attacks=5, delta=1e-5))
    except ValueError:
        result = "untestable"
    return result, time.process_time() - start


def main() -> None:
    old = old_module()
    for claim in (4.0, 9.0, 12.3):
        (old_result, old_s), (new_result, new_s) = timed(old, claim), timed(new, claim)
        ratio = f"ratio {old_s / new_s:.0f}x" if new_s >= 1e-4 else "new at once (under 0.1 ms)"
        print(f"claim {claim:g}: old {old_result} in {old_s:.3f} CPU s, new {new_result} in {new_s:.4f} CPU s, {ratio}")


if __name__ == "__main__":
    main()
