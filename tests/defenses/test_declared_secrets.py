"""Review l6 L6: a defense's ``secrets`` that is not a set of 'labels'/'features' (a typo, a string, a property) failed
with a traceback in planning (StopIteration) and in ``vflpriv describe`` (TypeError): one ``error:`` line, exit 2."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_helpers import one_error_line, refused_in_planning  # noqa: E402

PLUGIN = '''
from vflpriv.defenses.label_dp import LabelDP


class TypoSecrets(LabelDP):
    secrets = frozenset({"label"})


class StrSecrets(LabelDP):
    reads_labels = reads_features = False
    secrets = "labels"


class PropSecrets(LabelDP):
    reads_labels = reads_features = False

    @property
    def secrets(self):
        return frozenset({"labels"})
'''

VALID = "give a set or frozenset of 'labels', 'features'"


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    (tmp_path / "l6_secrets_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("name", ["TypoSecrets", "StrSecrets", "PropSecrets"])
def test_a_secrets_that_is_no_set_of_known_secrets_is_one_error_line_in_planning(plugin, monkeypatch, name):
    refused_in_planning(["evaluate", "--defense", f"l6_secrets_plugin:{name}", "--strengths", "1", "--seeds", "0"],
                        f"defense class l6_secrets_plugin.{name}: its secrets are", plugin, monkeypatch)


def test_a_secrets_property_is_one_error_line_in_describe(plugin, monkeypatch):
    from typer.testing import CliRunner

    from vflpriv.cli import app

    monkeypatch.chdir(plugin)
    result = CliRunner().invoke(app, ["describe", "l6_secrets_plugin:PropSecrets"])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, f"l6_secrets_plugin.PropSecrets: its secrets are a property;")
    assert VALID in result.output
