"""The plots' line colours without importing seaborn: its palettes, as seaborn gives them."""

from __future__ import annotations

import pytest

from vflpriv.reports.plots import palette_of


@pytest.mark.parametrize("n", [1, 2, 7, 10, 11, 14])
def test_the_colours_are_seaborns_colorblind_palette_then_husl(n):
    sns = pytest.importorskip("seaborn")
    want = sns.color_palette("colorblind" if n <= 10 else "husl", n)
    assert [tuple(c) for c in palette_of(n)] == [tuple(c) for c in want]
