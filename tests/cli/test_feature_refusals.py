"""Feature attacks refused while planning, with one error line and nothing written: a role the method sends nothing
feature-bearing, an adversary that is its own victim, a role the attack does not declare, more known samples than
the aligned samples trained on, image scores or decoders on tabular features."""

from __future__ import annotations

import pytest
from cli_helpers import one_error_line, wrote_nothing
from typer.testing import CliRunner

from vflpriv.cli import app

FAST = ["--method", "splitnn", "--seeds", "0", "--strengths", "1", "--set", "finetune.epochs=2", "--quiet"]


@pytest.mark.parametrize(("args", "needle"), [
    (["--attack", "fi-decoder", "--set", "attack.adversary=server"],
     "reconstructs party 1 (the passive party)'s features from the embedding or gradient messages it sends about each "
     "sample in finetune; in method 'splitnn' the server receives none from it then (it receives: nothing)"),
    (["--attack", "fi-decoder", "--method", "ssvfl-i", "--set", "attack.adversary=1"],
     "in method 'ssvfl-i' party 1 (the passive party) receives none from it then (it receives: nothing)"),
    (["--attack", "fi-decoder", "--set", "attack.adversary=1", "--set", "attack.victim=1"],
     "the adversary, party 1 (the passive party), is its own victim"),
    (["--attack", "fi-decoder", "--set", "attack.adversary=srv"],
     "invalid attack.adversary='srv': 'srv' is no role; give a party index (0: the active party, 1 and up: the passive "
     "parties) or 'server'"),
    (["--attack", "grn", "--set", "attack.adversary=Server"],  # any case: the server, refused for grn as 'server' is
     "attack 'grn' infers features and may be run by the active party; its adversary here is the server"),
    (["--attack", "grn", "--set", "attack.adversary=server"],
     "attack 'grn' infers features and may be run by the active party; its adversary here is the server"),
    (["--attack", "mc", "--set", "attack.adversary=0"], "label attack 'mc' is run by partition.adversary"),
    (["--attack", "fi-decoder", "--set", "partition.aux_features=201"],
     "partition.aux_features=201 exceeds the 200 aligned training samples the active party trains on"),
    (["--attack", "fi-decoder", "--dataset", "breast-cancer", "--set", "attack.options.image_metrics=true"],
     "PSNR and SSIM score images; the victim's features are tabular"),
    (["--attack", "fi-decoder", "--dataset", "breast-cancer", "--set", "attack.options.decoder=conv"],
     "decoder=conv decodes to images; the victim's features are tabular"),
    (["--attack", "grn", "--method", "fedhssl", "--phase", "pretrain"],
     "grn observes the trained model's outputs: attack the finetune phase"),
])
def test_a_feature_attack_that_cannot_run_is_refused_before_anything_is_written(tmp_path, monkeypatch, args, needle):
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    argv = ["evaluate", *FAST, *args, "--out", str(tmp_path / "o")]
    if "--method" in args:  # the case names its own method
        at = argv.index("--method")
        del argv[at:at + 2]
    with wrote_nothing(tmp_path):
        result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2, result.output
    one_error_line(result.output, needle)


def test_tune_refuses_a_feature_attack(tmp_path, monkeypatch):
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    with wrote_nothing(tmp_path):
        result = CliRunner().invoke(app, ["tune", "--method", "splitnn", "--attack", "fi-decoder", "--defense", "iso",
                                          "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    one_error_line(result.output, "tune bisects a defense for a label attack's accuracy; 'fi-decoder' infers features")
