"""With several attacks, a bad option or search space is named by the path the user writes to fix it
(``attack.search_space.mc.lr``, not ``attack.search_space.lr``): one ``error:`` line in planning, exit 2."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_helpers import one_error_line, wrote_nothing
from typer.testing import CliRunner

from vflpriv.cli import app

TUNED = ["--set", "attack.tune=true"]
CASES = [
    (["--set", "attack.search_space.mc.lr=0.1", *TUNED], "attack.search_space.mc.lr is a list, not the single value"),
    (["--set", "attack.search_space.mc.lr=[abc]", *TUNED], "invalid attack.search_space.mc.lr='abc'"),
    (["--set", "attack.search_space.gc.foo=[1]", *TUNED], "attack.search_space.gc names foo, not an option of attack"),
    (["--set", "attack.search_space.mc.lr=[]", *TUNED], "attack.search_space.mc.lr is empty; give at least one value"),
    (["--set", "attack.options.mc.lr=abc"], "invalid attack.options.mc.lr='abc'"),
    (["--set", "attack.options.mc.foo=1"], "unknown setting attack.options.mc.foo; valid keys here: head,"),
    (["--set", "attack.options.mc=3"], "(e.g. attack.options.mc.epochs=100); not a section of settings: mc=3"),
]


@pytest.mark.parametrize(("args", "needle"), CASES, ids=[" ".join(a)[:60] for a, _ in CASES])
def test_a_bad_setting_of_one_of_several_attacks_names_its_own_path(args, needle, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with wrote_nothing(tmp_path, Path(os.environ["VFLPRIV_CACHE"])):
        result = CliRunner().invoke(app, ["evaluate", "--attack", "mc,gc", "--seeds", "0", *args, "--dry-run"])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, needle)
