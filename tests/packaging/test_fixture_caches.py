"""Every test, and every module's shared fixture, runs with a cache folder of its own under pytest's temporary
folder, never the user's ``~/.cache/vflpriv`` (shared by both xdist workers and the user)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def seen_by_a_module_fixture():
    return os.environ.get("VFLPRIV_CACHE"), os.environ.get("VFLPRIV_CANARY_KEY")


def test_a_module_fixture_runs_with_a_cache_folder_of_its_own(seen_by_a_module_fixture, tmp_path_factory):
    cache, key = seen_by_a_module_fixture
    assert cache is not None and key is not None, "a module fixture ran with the user's cache"
    assert Path(cache).is_relative_to(tmp_path_factory.getbasetemp())
    assert cache != os.environ["VFLPRIV_CACHE"]  # and each test another, its own


def test_no_fixture_is_set_up_before_the_module_caches():
    """A session- or package-scoped fixture is set up before the module's cache folder: it would use the user's."""
    wide = [f"{p.relative_to(TESTS)}" for p in TESTS.rglob("*.py")
            if re.search(r"fixture\([^)]*scope=[\"'](session|package)[\"']", p.read_text(encoding="utf-8"))]
    assert wide == []
