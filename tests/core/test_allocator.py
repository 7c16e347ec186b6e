"""Freed tensor buffers are reused (vflpriv.models.allocator): no page faults for a buffer allocated again."""

import os
import subprocess
import sys

PROBE = """
import resource, sys, torch
from vflpriv.models.allocator import REUSE, SYSTEM, reuse_freed_memory, set_malloc
if sys.argv[1] == "reuse":
    assert reuse_freed_memory()
else:
    assert set_malloc(SYSTEM)
torch.ones(16 * 2**20).sum()  # 64 MiB, first touch
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    torch.ones(16 * 2**20).sum()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _env(**extra: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != "VFLPRIV_SYSTEM_MALLOC"}, **extra}


def _faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True, env=_env())
    return int(out.stdout.strip())


def test_reuse_avoids_the_page_faults_of_a_fresh_mapping() -> None:
    pages = 64 * 2**20 // 4096
    assert _faults("system") > 4 * pages  # each of the 5 allocations is a fresh mmap, faulted in again
    assert _faults("reuse") < pages // 10  # the freed buffer is taken again from malloc's free lists


def test_system_malloc_env_opts_out() -> None:
    code = "from vflpriv.models.allocator import reuse_freed_memory; print(reuse_freed_memory())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=_env(VFLPRIV_SYSTEM_MALLOC="1"))
    assert out.stdout.strip() == "False"
