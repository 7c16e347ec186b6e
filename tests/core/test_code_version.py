"""eps5's left: ``cache.code_version`` (in every cached pretraining's, prior's, trial's and dataset's key) hashed no
``vflpriv.auditors`` source, so an edited auditor (gradient-lrt's crafted canary rows change the training an attack's
cached search trials are keyed by) kept stale entries: every vflpriv module's source is hashed."""

from __future__ import annotations

import sys
from pathlib import Path

from vflpriv.store import cache


def test_every_vflpriv_module_s_source_is_in_the_cache_s_code_version(monkeypatch):
    import vflpriv.auditors.crafted  # noqa: F401 - an auditor's module among the loaded ones

    read = []
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: read.append(self.resolve()) or real(self))
    cache.code_version.__wrapped__()  # the hash, computed anew (not the process's cached one)
    loaded = {Path(m.__file__).resolve() for name, m in list(sys.modules.items())
              if name.split(".")[0] == "vflpriv" and getattr(m, "__file__", None)}
    assert loaded and loaded <= set(read), sorted(loaded - set(read))[:3]
