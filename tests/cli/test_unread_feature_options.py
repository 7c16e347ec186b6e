"""A feature attack's or defense's option given a value that nothing reads (grn's precision without observe=rounded,
fi-inversion's decoder_epochs with init=mean or tv on tabular victims, embedding-dp's bottom_clip without
private_bottom), or one that never acts (fi-adversarial's SSIM threshold at 1 or above), is refused in planning:
the run would measure something else than asked, unnoticed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_helpers import one_error_line, planned, refused_in_planning, wrote_nothing
from typer.testing import CliRunner

from vflpriv.cli import app

REFUSED = [
    (["--attack", "grn", "--set", "attack.options.precision=3"],
     "precision=3 is read only with observe=rounded; set observe=rounded too, or leave precision out"),
    (["--attack", "grn", "--set", "attack.options.mean_weight=2"], "mean_weight=2.0 is read only with known_mean=true"),
    (["--attack", "grn", "--set", "attack.tune=true", "--set", "attack.search_space.precision=[1, 2]"],
     "attack.search_space.precision is searched, but no candidate of the search reads it: precision is read only "
     "with observe=rounded, and every candidate has observe=probs"),
    (["--attack", "grn", "--tune-attacks", "--set", "attack.search_space.observe=[logits]", "--set",
      "attack.options.precision=2"], "attack.options.precision=2 given, but no candidate of the search reads it"),
    (["--attack", "mc,grn", "--tune-attacks", "--set", "attack.search_space.grn.observe=[logits]", "--set",
      "attack.options.grn.precision=2"], "attack.options.grn.precision=2 given, but no candidate of the search"),
    (["--attack", "fi-inversion", "--dataset", "breast-cancer", "--tune-attacks", "--set", "attack.search_budget=9",
      "--set", "attack.search_space.tv=[0, 0.1]"], "the candidate tv=0 of attack.search_space.tv does not fit this "
                                                   "data (tv=0: tv weighs the total variation of image "
                                                   "reconstructions only, and the victim's features are tabular, so "
                                                   "any value is unread"),  # review lo5 F9: not "tv=0 weighs"
    # the search space is named where the user wrote it, not as an option (review lo6 F4)
    (["--attack", "fi-inversion,mc", "--dataset", "breast-cancer", "--tune-attacks", "--set",
      "attack.search_space.fi-inversion.tv=[0.1]"], "the candidate tv=0.1 of attack.search_space.fi-inversion.tv "
                                                    "does not fit this data (tv=0.1: tv weighs"),
    (["--attack", "fi-inversion", "--set", "attack.options.init=mean", "--set", "attack.options.decoder_epochs=5"],
     "decoder_epochs=5 is read only with init=decoder"),
    (["--attack", "fi-inversion", "--dataset", "breast-cancer", "--set", "attack.options.tv=0.5"],
     "attack.options.tv=0.5: tv weighs the total variation of image reconstructions only"),
    (["--attack", "fi-decoder", "--defense", "embedding-dp", "--set", "defenses.0.options.private_bottom=false",
      "--set", "defenses.0.options.bottom_clip=3"], "bottom_clip=3.0 is read only with private_bottom=true"),
    (["--attack", "fi-decoder", "--defense", "fi-adversarial", "--set", "defenses.0.options.loss=ssim", "--set",
      "defenses.0.options.threshold=1"], "options.threshold=1: the SSIM it is compared with never exceeds 1, so the "
                                         "victim's term would never act on party 1's features; give tau in [0, 1)"),
]
KEPT = [
    ["--attack", "grn", "--set", "attack.options.precision=3", "--set", "attack.options.observe=rounded"],
    ["--attack", "grn", "--set", "attack.options.precision=1"],  # the default, given: nothing asked for is lost
    ["--attack", "fi-inversion", "--set", "attack.options.tv=0.5"],  # digits' halves are images
    # a joint search: the fixed option is read by some candidate (review lo3 F3)
    ["--attack", "fi-inversion", "--tune-attacks", "--set", "attack.search_space.init=[mean, decoder]", "--set",
     "attack.options.decoder_epochs=5"],
    ["--attack", "grn", "--tune-attacks", "--set", "attack.search_space.observe=[probs, rounded]", "--set",
     "attack.options.precision=2"],
    ["--attack", "mc,grn", "--tune-attacks", "--set", "attack.search_space.grn.observe=[probs, rounded]", "--set",
     "attack.options.grn.precision=2"],
    ["--attack", "fi-decoder", "--defense", "embedding-dp", "--set", "defenses.0.options.private_bottom=false"],
    ["--attack", "fi-decoder", "--defense", "fi-adversarial", "--set", "defenses.0.options.loss=ssim", "--set",
     "defenses.0.options.threshold=0.9"],
    ["--attack", "fi-decoder", "--defense", "fi-adversarial", "--set", "defenses.0.options.threshold=1.5"],  # mse's cap
]


@pytest.mark.parametrize(("args", "needle"), REFUSED, ids=[" ".join(a)[:70] for a, _ in REFUSED])
def test_an_option_nothing_reads_is_refused(args, needle, tmp_path, monkeypatch):
    refused_in_planning(["evaluate", "--seeds", "0", *args], needle, tmp_path, monkeypatch)


@pytest.mark.parametrize("args", KEPT, ids=[" ".join(a)[:70] for a in KEPT])
def test_an_option_read_or_left_at_its_default_is_kept(args, tmp_path, monkeypatch):
    result = planned(["evaluate", "--seeds", "0", *args], tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output


AUDIT = ["audit", "--method", "splitnn", "--quick", "--seeds", "0", "--attacks", "grn", "--defenses", "none",
         "--tune-attacks", "--set", "audit.attack_options.grn.precision=2", "--dry-run"]


@pytest.mark.parametrize(("observe", "code"), [("[probs, rounded]", 0), ("[logits]", 2)])
def test_the_tuned_audit_judges_a_fixed_option_over_its_search(observe, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with wrote_nothing(tmp_path, Path(os.environ["VFLPRIV_CACHE"])):
        result = CliRunner().invoke(app, [*AUDIT, "--set", f"audit.search_spaces.grn.observe={observe}"])
    assert result.exit_code == code, result.output
    if code:
        one_error_line(result.output, "audit.attack_options.grn.precision=2 given, but no candidate of the search")


def test_the_tuned_audit_s_canary_free_control_reads_what_its_untuned_run_reads(tmp_path, monkeypatch):
    """gc's n_init fixed beside method=spectral is read by the search's kmeans candidates: the tuned audit keeps it,
    and its control training (untuned) runs without it instead of refusing what the tuned runs accept."""
    args = ["audit", "--method", "splitnn", "--quick", "--seeds", "0", "--attacks", "gc", "--defenses", "none",
            "--tune-attacks", "--canaries", "4", "--set", "audit.attack_options.gc.method=spectral", "--set",
            "audit.attack_options.gc.n_init=3", "--dry-run"]
    monkeypatch.chdir(tmp_path)
    with wrote_nothing(tmp_path, Path(os.environ["VFLPRIV_CACHE"])):
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output


def test_the_audit_names_a_searched_value_where_the_user_wrote_it(tmp_path, monkeypatch):
    """Review lo6 F4: it named audit.attack_options.fi-inversion.tv=0.1 for audit.search_spaces.fi-inversion.tv."""
    args = ["audit", "--method", "splitnn", "--dataset", "breast-cancer", "--seeds", "0", "--attacks",
            "fi-inversion,mc", "--defenses", "none", "--tune-attacks", "--set",
            "audit.search_spaces.fi-inversion.tv=[0.1]"]
    output = refused_in_planning(args, "the candidate tv=0.1 of audit.search_spaces.fi-inversion.tv does not fit "
                                       "this data (tv=0.1: tv weighs", tmp_path, monkeypatch)
    assert "attack_options" not in output
