"""The command line, through typer's CliRunner: outputs, reproducibility and one-line errors."""

import sys

import pandas as pd
import pytest
from typer.testing import CliRunner

from vflpriv.cli import app

FAST = ["--set", "finetune.epochs=2", "--set", "attack.options.epochs=20", "--set", "attack.prior_epochs=20",
        "--set", "model.hidden=64", "--set", "model.out_dim=32", "--set", "attack.prior=aux", "--jobs", "1"]


@pytest.fixture
def runner():
    return CliRunner()


def test_evaluate_writes_outputs_and_is_reproducible(runner, tmp_path):
    args = ["evaluate", "--method", "splitnn", "--attack", "mc", "--defense", "iso",
            "--strengths", "0,25", "--seeds", "0,1", *FAST]
    first = runner.invoke(app, [*args, "--out", str(tmp_path / "a")])
    assert first.exit_code == 0, first.output
    for name in ("results.csv", "cap.csv", "tradeoff.png"):
        assert (tmp_path / "a" / name).stat().st_size > 0
    assert "CAP splitnn / mc / iso (finetune)" in first.output
    second = runner.invoke(app, [*args, "--out", str(tmp_path / "b")])
    assert second.exit_code == 0
    a = pd.read_csv(tmp_path / "a" / "results.csv")
    b = pd.read_csv(tmp_path / "b" / "results.csv")
    cols = ["strength", "seed", "utility", "attack_accuracy", "prior_accuracy", "comm_mb"]
    pd.testing.assert_frame_equal(a[cols], b[cols])
    assert len(a) == 4 and set(a["status"]) == {"ok"}
    cap = pd.read_csv(tmp_path / "a" / "cap.csv")
    assert list(cap.columns) == ["method", "dataset", "attack", "defense", "phase", "variant", "utility_metric", "cap",
                                 "cap_std", "cap_optimistic", "dcs", "dcs_std", "n_seeds", "status"]
    assert cap["n_seeds"].item() == 2 and cap["utility_metric"].item() == "accuracy"
    assert 0 < cap["dcs"].item() <= 1  # λ=0 is ISO's identity: the undefended utility DCS compares with


def _table_rows(output: str) -> dict[str, list[str]]:
    """Rows of the console's box tables, by their first cell."""
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in output.splitlines() if line.count("│") > 3]
    return {r[0]: r for r in rows}


def test_evaluate_console_shows_leakage_utility_metric_and_what_the_adversary_knows(runner, tmp_path):
    args = ["evaluate", "--method", "splitnn", "--attack", "mc", "--defense", "iso", "--strengths", "0,25",
            "--seeds", "0,1", *FAST, "--out", str(tmp_path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "splitnn on digits (utility: test accuracy)" in out
    assert "adversary: party 1, which knows 80 auxiliary labels (drawn from its unlabeled local samples)" in out
    assert "4 runs on 4 trainings: 0 already in the store, 4 to run" in out
    header = next(line for line in out.splitlines() if "utility (test accuracy)" in line)
    assert "leakage" in header and "strength" in header
    results = pd.read_csv(tmp_path / "results.csv")
    row = _table_rows(out)["λ=25"]
    at25 = results[results["strength"] == 25]
    leak = at25["attack_accuracy"] - at25["prior_accuracy"]
    assert row[-2] == f"{leak.mean():+.3f} ± {leak.std(ddof=0):.3f}"
    again = runner.invoke(app, args)
    assert "4 runs on 4 trainings: 4 already in the store, 0 to run" in again.output


def test_evaluate_without_a_defense_prints_no_strength_and_no_cap(runner, tmp_path):
    result = runner.invoke(app, ["evaluate", "--method", "splitnn", "--defense", "none", "--seeds", "0", *FAST,
                                 "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    header = next(line for line in result.output.splitlines() if "utility (test accuracy)" in line)
    assert "λ=0" not in result.output and "strength" not in header and "leakage" in header
    assert "no defense swept, so no CAP" in result.output and "CAP splitnn" not in result.output
    assert not (tmp_path / "cap.csv").exists() and (tmp_path / "results.csv").exists()


def test_out_holding_another_experiments_results_is_refused_unless_overwrite(runner, tmp_path):
    base = ["evaluate", "--method", "splitnn", "--defense", "iso", "--strengths", "0", *FAST, "--out", str(tmp_path)]
    assert runner.invoke(app, [*base, "--seeds", "0,1"]).exit_code == 0
    before = (tmp_path / "results.csv").read_text()
    widened = runner.invoke(app, [*base, "--seeds", "0,1,2"])  # the same experiment, one more seed: its own results
    assert widened.exit_code == 0, widened.output
    assert len(pd.read_csv(tmp_path / "results.csv")) == 3
    (tmp_path / "results.csv").write_text(before)
    other = runner.invoke(app, [*base, "--seeds", "5"])
    lines = [line for line in other.output.splitlines() if line.strip()]
    assert other.exit_code == 2 and len(lines) == 1
    assert "holds another experiment's results: its results.csv lists 2 runs, 2 of them not part of this one" in lines[0]
    assert (tmp_path / "results.csv").read_text() == before
    replaced = runner.invoke(app, [*base, "--seeds", "5", "--overwrite"])
    assert replaced.exit_code == 0 and len(pd.read_csv(tmp_path / "results.csv")) == 1
    (tmp_path / "results.csv").write_text("name,score\nmine,1\n")
    foreign = runner.invoke(app, [*base, "--seeds", "5"])
    assert foreign.exit_code == 2 and "holds a results.csv that vflpriv did not write" in foreign.output


@pytest.mark.parametrize("args,needle", [
    (["evaluate", "--method", "nope"], "valid methods: "),
    (["evaluate", "--attack", "nope"], "valid attacks: "),
    (["evaluate", "--defense", "nope"], "valid defenses: "),
    (["evaluate", "--dataset", "nope"], "valid datasets: "),
    (["evaluate", "--strengths", "-1"], "strengths"),
    (["evaluate", "--strengths", "a,b"], "comma-separated"),
    (["evaluate", "--set", "partition.labeled=400"], "exceeds the 287 aligned"),
    (["evaluate", "--set", "partition.aux=5000"], "lower partition.aux"),
    (["evaluate", "--config", "/no/such/file.yaml"], "cannot read config file"),
    (["evaluate", "--phase", "middle"], "valid phases"),
    (["evaluate", "--set", "attack.options.nope=1"], "attack.options.nope"),
    (["evaluate", "--no-such-flag"], "--no-such-flag"),
    (["list", "things"], "valid choices: methods, attacks, defenses, datasets"),
])
def test_bad_input_is_one_error_line(runner, args, needle, tmp_path):
    result = runner.invoke(app, [*args, "--out", str(tmp_path)] if args[0] == "evaluate" else args)
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "results.csv").exists()


@pytest.mark.parametrize(("what", "name", "words"), [
    ("methods", "splitnn", "No pretraining"), ("attacks", "mc", "auxiliary labels"),
    ("defenses", "iso", "ISO on embeddings"), ("datasets", "digits", "8x8 digits"),
])
def test_list_gives_each_name_a_line_saying_what_it_is(runner, what, name, words):
    from vflpriv.config.registry import REGISTRIES

    result = runner.invoke(app, ["list", what])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert [line.split()[0] for line in lines] == REGISTRIES[what].names()
    line = next(line for line in lines if line.split()[0] == name)
    assert words in line and len(line) <= 140


@pytest.mark.parametrize(("name", "text"), [("fedhssl", "concat = [f_c, f_l]")])
def test_describe_prints_bracketed_text_as_written_not_as_markup(runner, name, text):
    result = runner.invoke(app, ["describe", name])
    assert result.exit_code == 0 and text in " ".join(result.output.split())


def test_describe_prints_a_plugin_s_bracketed_description_as_written(runner, monkeypatch):
    import types

    from pydantic import BaseModel, Field

    from vflpriv.defenses.iso import IsotropicNoise

    class Bracketed(IsotropicNoise):
        """Noise on [red]every[/red] row, [bold]scaled[/bold]."""

        class Options(BaseModel):
            mode: str = Field("a", description="one of [a, b] or [link=x]c[/link]")

    module = types.ModuleType("bracketed_plugin")
    module.Bracketed = Bracketed
    monkeypatch.setitem(sys.modules, "bracketed_plugin", module)
    result = runner.invoke(app, ["describe", "bracketed_plugin:Bracketed"])
    flat = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert "[red]every[/red] row, [bold]scaled[/bold]" in flat and "[a, b] or [link=x]c[/link]" in flat


def test_config_file_and_set_precedence(runner, tmp_path):
    cfg = tmp_path / "exp.yaml"
    cfg.write_text("partition:\n  labeled: 50\n  aux: 20\nseeds: [0]\nstrengths: [1]\n")
    result = runner.invoke(app, ["evaluate", "--config", str(cfg), "--set", "partition.labeled=60", *FAST,
                                 "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    import json

    row = pd.read_csv(tmp_path / "o" / "results.csv").iloc[0]
    assert row["strength"] == 1.0 and row["seed"] == 0
    from vflpriv.store.sqlite import Store

    with Store(tmp_path / "o" / "results.sqlite") as store:
        assert json.loads(store.all()[0].config)["partition"]["labeled"] == 60


def test_datasets_lists_presence_and_how_to_get(runner, monkeypatch, tmp_path):
    monkeypatch.setenv("VFLPRIV_DATA", str(tmp_path))
    result = runner.invoke(app, ["datasets"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    lines = {line.split("│")[1].strip(): line for line in result.output.splitlines() if line.count("│") > 3}
    assert "yes" in lines["digits"] and "no" in lines["nus-wide"] and "dataset.root" in result.output


def test_version_and_help_follow_command_line_conventions(runner):
    from vflpriv.store.provenance import own_version

    shown = runner.invoke(app, ["--version"])
    assert shown.exit_code == 0 and shown.output.strip() == f"vflpriv {own_version()}"
    for command in ([], ["evaluate"], ["sweep"], ["audit"], ["tune"], ["table"]):
        help_text = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"}).output
        assert "<bool>" not in help_text and "list[str]" not in help_text, help_text
    assert "KEY=VALUE" in runner.invoke(app, ["evaluate", "--help"], env={"COLUMNS": "200"}).output


def test_a_feature_only_evaluate_names_its_own_adversary_and_not_the_label_adversary(runner, tmp_path):
    """The header's label adversary (party 1 and its auxiliary labels) is no part of a feature attack's run: the
    active party attacks there, and the header said party 1 was the adversary."""
    base = ["evaluate", "--method", "splitnn", "--defense", "none", "--seeds", "0", "--dry-run", "--out", str(tmp_path)]
    features = runner.invoke(app, [*base, "--attack", "fi-decoder"])
    assert features.exit_code == 0, features.output
    assert "feature attack fi-decoder: party 0 attacks party 1's features" in features.output
    assert "partition: 2 parties" in features.output and "auxiliary labels" not in features.output
    both = runner.invoke(app, [*base, "--attack", "mc,fi-decoder"])
    assert both.exit_code == 0, both.output
    assert "adversary: party 1, which knows 80 auxiliary labels" in both.output
