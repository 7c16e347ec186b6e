"""What a new user following the README and the docs ran into (issues 46-49's "run it yourself"), each checked."""

import sys
import types

import pytest
from typer.testing import CliRunner

from vflpriv.cli import app


@pytest.fixture
def runner():
    return CliRunner()


def test_a_plugin_without_a_docstring_is_not_described_by_its_base_class(runner, monkeypatch):
    """The plugin guide's AggVFL had no docstring: `describe` and `list` showed Method's "Base of registered methods"."""
    from vflpriv.methods import Method

    class Undocumented(Method):
        top = "sum"

    module = types.ModuleType("undocumented_plugin")
    module.Undocumented = Undocumented
    monkeypatch.setitem(sys.modules, "undocumented_plugin", module)
    result = runner.invoke(app, ["describe", "undocumented_plugin:Undocumented"])
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert "Base of registered methods" not in result.output and "Undocumented (no docstring)" in first, first
