"""One rule for a number's spelling wherever vflpriv reads it (review-hostile H2, H3, H7, H8): an unquoted number not
written plainly is refused in ``--set`` values and config files alike, a quoted text is text, a number field refuses
a text that only int()/float() read ('1_00'), and ``--help`` is help."""

from __future__ import annotations

import pytest
from cli_helpers import planned, refused_in_planning
from typer.testing import CliRunner

from vflpriv.cli import app

FILES = [
    ("e.yaml", "seeds: [017]\n", "config file e.yaml is not valid YAML: 017 is no plain number; write ASCII decimal"),
    ("d.yaml", "seeds: [1:00]\n", "d.yaml is not valid YAML: 1:00 is no plain number; write ASCII decimal"),
    ("n.yaml", "seeds: [0]\npartition:\n  labeled: 08\n", "08 is no plain number; write ASCII decimal digits"),
    ("f.yaml", "partition:\n  labeled: '1_00'\n", "invalid partition.labeled='1_00': '1_00' is no plain number"),
    ("t.toml", '[partition]\nlabeled = "1_00"\n', "invalid partition.labeled='1_00': '1_00' is no plain number"),
]


@pytest.mark.parametrize(("name", "text", "needle"), FILES, ids=[f for f, _, _ in FILES])
def test_a_config_file_s_unplain_number_is_refused(name, text, needle, tmp_path, monkeypatch):
    """A config file read ``017`` as 15, ``1:00`` as 60 and ``'1_00'`` as 100, where ``--set`` refused them."""
    (tmp_path / name).write_text(text)
    out = refused_in_planning(["evaluate", "--config", name], needle, tmp_path, monkeypatch)
    assert "invalid" in out or "(line " in out


def test_an_unquoted_leading_zero_is_refused_whatever_its_digits(tmp_path, monkeypatch):
    """``07`` was refused (YAML 1.1 octal) and ``08`` read as 8 (YAML 1.1 text): one rule, both refused."""
    refused_in_planning(["evaluate", "--set", "partition.labeled=08"], "08 is no plain number", tmp_path, monkeypatch)


@pytest.mark.parametrize("value", ["method.name='1_0'", "method.name=!!str 1_0", "attack.name='2024_01'"])
def test_a_quoted_text_float_reads_is_text(value, tmp_path, monkeypatch):
    """A quoted name or path that float() reads with '_' was refused as 'no plain number'; it is the setting's text."""
    result = planned(["evaluate", "--set", value], tmp_path, monkeypatch)
    assert result.exit_code == 2 and "plain number" not in result.output, result.output
    assert "unknown" in result.output and "'" + value.split(" ")[-1].split("=")[-1].strip("'") + "'" in result.output


def test_help_is_printed_beside_an_unplain_number():
    """``--jobs 1_0 --help`` printed the number's error; click's --help is eager (``--jobs abc --help`` is help)."""
    result = CliRunner().invoke(app, ["evaluate", "--jobs", "1_0", "--help"])
    assert result.exit_code == 0 and "Usage:" in result.output, result.output
