"""A method plugin whose declared ``sends`` contradict what it sends (the active party's gradient left out of the
declaration, though split learning sends it) is refused with the plugin named, by its registered name and its class:
a run's record says which method broke its protocol, and ``audit --check-only`` refuses it in one line."""

from __future__ import annotations

from typer.testing import CliRunner

from vflpriv.cli import app
from vflpriv.config.registry import METHODS
from vflpriv.engine import EMBEDDING, FINETUNE, INFERENCE
from vflpriv.methods.splitnn import SplitNN
from vflpriv.runner.execution import run_safely


class UndeclaredGradient(SplitNN):
    """Split learning that declares only the passive party's embeddings."""

    sends = frozenset({("passive", EMBEDDING, FINETUNE), ("passive", EMBEDDING, INFERENCE)})


NAMED = "method 'liar' (test_lying_method_plugin.UndeclaredGradient): the method sent a gradient message"


def test_a_run_of_a_method_that_sends_what_it_does_not_declare_fails_naming_the_plugin(tiny):
    METHODS.register("liar", UndeclaredGradient)
    for attack in ("fi-decoder", "mc"):
        (record,) = run_safely([tiny(method={"name": "liar"}, attack={"name": attack, "options": {"epochs": 3}})])
        assert record.status == "failed" and NAMED in record.error, record.error


def test_audit_check_only_refuses_it_in_one_line_naming_the_plugin(tmp_path):
    METHODS.register("liar", UndeclaredGradient)
    result = CliRunner().invoke(app, ["audit", "--method", "liar", "--check-only", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: refused: " + NAMED), result.output
