"""Hostile settings of the feature side that the planner must refuse (one ``error:`` line naming the problem and what
is valid, exit code 2, nothing written): options a feature defense cannot honour on the victim's data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_helpers import one_error_line, wrote_nothing
from typer.testing import CliRunner

from vflpriv.cli import app

CASES = [
    # fi-adversarial's imagined decoder and its measure on a tabular victim (they failed inside the training)
    (["--dataset", "breast-cancer", "--defense", "fi-adversarial", "--set", "defenses.0.options.loss=ssim"],
     "options.loss=ssim scores images; party 1's features are tabular: use mse or auto"),
    (["--dataset", "breast-cancer", "--defense", "fi-adversarial", "--set", "defenses.0.options.decoder=conv"],
     "options.decoder=conv decodes to images; party 1's features are tabular: use mlp or auto"),
    # a bottleneck no memory holds (2^31 - 1 wide): refused by its bound, not by the allocator
    (["--defense", "fi-adversarial", "--set", "defenses.0.options.bottleneck=2147483647"],
     "defenses[0].options.bottleneck=2147483647"),
]


@pytest.mark.parametrize(("args", "needle"), CASES, ids=[" ".join(a)[:70] for a, _ in CASES])
def test_a_feature_defense_option_the_victim_s_data_cannot_take_is_refused_before_anything_is_written(
        args, needle, tmp_path, monkeypatch):
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    with wrote_nothing(tmp_path, Path(os.environ["VFLPRIV_CACHE"])):
        result = CliRunner().invoke(app, ["evaluate", "--attack", "fi-decoder", "--seeds", "0", "--strengths", "1",
                                          *args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, needle)
