"""``canaries_needed`` at its count limits (``vflpriv.common.canary_bound``), written for mutants the mutation scheme
left alive: as many runs as MAX_CANARIES still plant one canary each, and no run at all is no count; an untestable
claim's message names the cap at MAX_CANARIES."""

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


@pytest.mark.parametrize("seeds", [1, 7])
def test_an_untestable_claim_names_the_cap_at_the_most_canaries_not_where_the_doubling_stopped(seeds):
    """At delta 0.01 the cap grows past MAX_CANARIES (the doubling's last count is up to twice it: 14.49 for one run,
    14.36 for seven) but stays below the pure cap the claim passed: the message names the cap at the most canaries
    the search may use, MAX_CANARIES // seeds a run (14.22)."""
    most = canary_bound.MAX_CANARIES // seeds * seeds
    there = canary_bound.cap(canaries=most, classes=10, delta=0.01)
    with pytest.raises(canary_bound.Untestable, match=rf"\(their cap reaches {there:.2f} there\)$"):
        canary_bound.canaries_needed(14.5, classes=10, delta=0.01, seeds=seeds)
    assert f"{there:.2f}" == "14.22"
