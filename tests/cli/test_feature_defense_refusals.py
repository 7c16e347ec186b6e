"""A feature defense that cannot act is refused while planning: one ``error:`` line naming the problem and what is
valid, exit code 2, nothing written (no output folder, store, cache entry or file)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_helpers import one_error_line, wrote_nothing
from typer.testing import CliRunner

from vflpriv.cli import app

CASES = [
    # bad strengths, on each defense's own axis
    (["--defense", "nopeek", "--strengths", "2e6"], "must lie in [0, 1e+06]"),
    (["--defense", "embedding-dp", "--strengths", "0.5,2e6"], "strength (sigma) must lie in [0, 1e+06]"),
    (["--defense", "embedding-dp", "--set", "defenses.0.options.clip=0"], "defenses[0].options.clip=0"),
    (["--defense", "fi-adversarial", "--set", "defenses.0.options.decoder_steps=0"], "decoder_steps"),
    # phases where a defense cannot act
    (["--defense", "mid-sender", "--phase", "pretrain", "--method", "local-simsiam"], "acts in finetune only"),
    (["--defense", "embedding-dp", "--phase", "pretrain", "--method", "fedhssl"], "acts in finetune only"),
    (["--defense", "nopeek", "--phase", "pretrain", "--method", "vflhlp"], "pretrain-passive-loss in pretrain"),
    (["--defense", "fi-adversarial", "--phase", "pretrain", "--method", "local-simsiam", "--set",
      "defenses.0.options.bottleneck=8"], "options.bottleneck is a layer at the cut"),
    # methods that send no embedding, or train without the defense's points
    (["--defense", "embedding-dp", "--method", "local-a"], "method 'local-a' sends none"),
    (["--defense", "nopeek", "--method", "centralized-lr"], "method 'centralized-lr' sends none"),
    (["--defense", "mid-sender", "--method", "ssvfl-i"], "has no passive training in finetuning (frozen encoders"),
    (["--defense", "nopeek", "--method", "ssvfl-i"], "no passive loss or update exists there; it acts in pretraining too: "
                                                     "use phase pretrain"),
    # who protects what
    (["--defense", "nopeek", "--set", "defenses.0.party=0"], "party must be 1..1, or unset"),
    (["--defense", "mid-sender", "--set", "defenses.0.kinds=[embedding]"], "not on messages; remove kinds"),
]


@pytest.mark.parametrize(("args", "needle"), CASES, ids=[" ".join(a)[:70] for a, _ in CASES])
def test_a_feature_defense_that_cannot_act_is_refused_before_anything_is_written(args, needle, tmp_path, monkeypatch):
    attack = "mc" if "--phase" in args else "fi-decoder"  # a pretraining phase's own attack: the defense speaks first
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    with wrote_nothing(tmp_path, Path(os.environ["VFLPRIV_CACHE"])):
        result = CliRunner().invoke(app, ["evaluate", "--attack", attack, "--seeds", "0", *args,
                                          "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, needle)


def test_embedding_dp_beside_another_defense_at_the_victim_s_points_is_refused(tmp_path):
    config = tmp_path / "both.yaml"
    config.write_text("attack: {name: fi-decoder}\ndefenses:\n  - {name: embedding-dp, strength: 1, sweep: true}\n"
                      "  - {name: nopeek, strength: 1}\n")
    with wrote_nothing(tmp_path):
        result = CliRunner().invoke(app, ["evaluate", "--config", str(config), "--seeds", "0",
                                          "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, "cannot be combined with nopeek")
