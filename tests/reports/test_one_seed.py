"""One seed has no spread: numbers show without "± 0.000", and the CAP tables claim no test of ties."""

from __future__ import annotations

import math

import pytest
from typer.testing import CliRunner

from vflpriv.cli import app
from vflpriv.reports.tables import mean_std


@pytest.mark.parametrize(("mean", "std", "n", "sign", "shown"), [
    (0.5, 0.0, 1, False, "0.500"), (0.5, float("nan"), 1, False, "0.500"), (0.5, 0.02, 2, False, "0.500 ± 0.020"),
    (0.01, 0.003, 3, True, "+0.010 ± 0.003"), (-0.01, 0.0, 1, True, "-0.010"), (math.nan, 0.1, 3, False, "n/a"),
    (None, None, 0, False, "n/a"), (0.5, None, 3, False, "0.500"),
])
def test_mean_std_shows_a_spread_only_over_two_or_more(mean, std, n, sign, shown):
    assert mean_std(mean, std, n=n, sign=sign) == shown


def test_a_one_seed_evaluate_prints_no_spread_and_no_test_of_ties(tmp_path):
    result = CliRunner().invoke(app, ["evaluate", "--method", "splitnn", "--seeds", "0", "--strengths", "1,25",
                                      "--set", "finetune.epochs=2", "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert "±" not in result.output and "over 1 seed\n" in result.output and "(one seed;" in result.output
    written = _tables(tmp_path)
    assert "±" not in written and "one seed: no spread, so no test of ties" in written and "Welch" not in written


def test_two_seeds_show_their_spread_and_the_test(tmp_path):
    result = CliRunner().invoke(app, ["evaluate", "--method", "splitnn", "--seeds", "0,1", "--strengths", "1",
                                      "--set", "finetune.epochs=2", "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert "over 2 seeds" in result.output and "mean ± std over seeds" in result.output
    written = _tables(tmp_path)
    assert "±" in written and "Welch" in written


def _tables(tmp_path) -> str:
    """Every Markdown file ``vflpriv table`` writes for the store of ``tmp_path/o``."""
    result = CliRunner().invoke(app, ["table", str(tmp_path / "o"), "--out", str(tmp_path / "t")])
    assert result.exit_code == 0, result.output
    return "\n".join(p.read_text() for p in sorted((tmp_path / "t").glob("*.md")))
