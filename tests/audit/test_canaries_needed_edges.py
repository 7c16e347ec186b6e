"""``canaries_needed`` at its count limits (``vflpriv.common.canary_bound``), written for mutants the mutation scheme
left alive: as many runs as MAX_CANARIES still plant one canary each, and no run at all is no count."""

from __future__ import annotations

import pytest

from vflpriv.common import canary_bound


def test_as_many_runs_as_the_most_canaries_plant_one_each():
    """seeds = MAX_CANARIES: one canary a run is exactly the most, not past it, so a claim one canary tests is
    testable at MAX_CANARIES canaries in all."""
    most = canary_bound.MAX_CANARIES
    assert canary_bound.canaries_needed(0.5, classes=10, seeds=most) == most


def test_no_run_is_refused_naming_seeds():
    with pytest.raises(ValueError, match=r"^seeds must be an integer >= 1, got 0$"):
        canary_bound.canaries_needed(1.0, classes=10, seeds=0)
