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


def _report_summary():
    """The report's worst-case panel of `vflpriv audit --method splitnn --seeds 0 --attacks mc,gc --defenses iso`:
    the utilities span 0.02, where matplotlib's own locator wrote 0.87000, 0.87250, ... over each other."""
    import pandas as pd

    rows = [("none", 0.0, 0.8889, 1.0), ("iso", 1.0, 0.8806, 1.0), ("iso", 5.0, 0.8694, 0.8),
            ("iso", 25.0, 0.8694, 0.8)]
    return pd.DataFrame([{"method": "splitnn", "variant": "", "dataset": "digits", "attack": "worst-case",
                          "defense": d, "phase": "finetune", "strength": s, "strength_axis": "lambda",
                          "strength_stronger": "higher", "utility_mean": u, "utility_std": 0.0,
                          "attack_accuracy_mean": a, "attack_accuracy_std": 0.0, "prior_accuracy_mean": 0.8,
                          "utility_metric": "accuracy"} for d, s, u, a in rows])


@pytest.mark.parametrize("by_defense", [True, False])
def test_the_tick_labels_of_a_narrow_utility_range_do_not_overlap(tmp_path, monkeypatch, by_defense):
    from vflpriv.reports import plots

    figures = []
    monkeypatch.setattr(plots.plt, "close", figures.append)  # keep the figure to measure its labels
    summary = _report_summary()
    if not by_defense:
        summary = summary[summary["defense"] == "iso"]
    plots.tradeoff_figures(summary, tmp_path, formats=("png",), by_defense=by_defense, dpi=100)
    (fig,) = figures
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        for labels in (ax.get_xticklabels(), ax.get_yticklabels()):
            boxes = [t.get_window_extent(renderer) for t in labels if t.get_text() and t.get_visible()]
            assert len(boxes) >= 2
            assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:]), \
                [t.get_text() for t in labels]


def _tiny_store(runner, out, *more):
    result = runner.invoke(app, ["evaluate", "--method", "splitnn", "--attack", "mc", "--defense", "label-dp",
                                 "--strengths", "2", "--seeds", "0", "--set", "partition.labeled=60", "--set",
                                 "partition.aux=20", "--set", "finetune.epochs=1", "--set", "attack.options.epochs=5",
                                 "--set", "attack.prior_epochs=5", "--jobs", "1", "--out", str(out), *more])
    assert result.exit_code == 0, result.output
    return out / "results.sqlite"


def test_table_names_every_file_it_wrote_and_the_earlier_tables_it_left_alone(runner, tmp_path):
    """`vflpriv table` wrote leakage.csv and epsilon_table.csv without saying so; a second store's tables into the same
    folder neither claim the first store's epsilon_table.csv as written nor delete it (it may be the user's)."""
    with_canaries = _tiny_store(runner, tmp_path / "a", "--canaries", "10")
    without = _tiny_store(runner, tmp_path / "b")
    out = tmp_path / "tables"
    first = runner.invoke(app, ["table", str(with_canaries), "--out", str(out)])
    assert first.exit_code == 0, first.output
    wrote = first.output.splitlines()[-1]
    assert {p.name for p in out.iterdir()} == {"cap_tables.md", "cap_tables.tex", "cap_tables.csv",
                                              "strength_rows.csv", "leakage.csv", "epsilon_table.csv"}
    assert all(str(p) in wrote for p in out.iterdir()), wrote
    earlier = (out / "epsilon_table.csv").read_bytes()
    second = runner.invoke(app, ["table", str(without), "--out", str(out)])
    assert second.exit_code == 0, second.output
    wrote, left = second.output.splitlines()[-2:]
    assert str(out / "epsilon_table.csv") not in wrote and str(out / "cap_tables.md") in wrote
    assert left.startswith("left as they were") and str(out / "epsilon_table.csv") in left
    assert (out / "epsilon_table.csv").read_bytes() == earlier


def test_the_audit_console_names_the_adversary_of_each_label_verdict_where_there_are_several():
    """`vflpriv audit --all-adversaries` printed three "gc (finetune): ..." lines, one per passive party, unnamed."""
    from vflpriv.cli.audit import verdict_lines

    def summary(adversaries):
        return {"verdicts": [{"adversary": a, "line": f"gc (finetune): leaks: yes ({a})"} for a in adversaries],
                "features": {"verdicts": [{"line": "fi-decoder by party 0 (the active party) on party 1's features"}]}}

    assert verdict_lines(summary([1, 2, 3])) == [
        "adversary party 1: gc (finetune): leaks: yes (1)", "adversary party 2: gc (finetune): leaks: yes (2)",
        "adversary party 3: gc (finetune): leaks: yes (3)",
        "fi-decoder by party 0 (the active party) on party 1's features"]
    assert verdict_lines(summary([1, 1]))[:2] == ["gc (finetune): leaks: yes (1)"] * 2  # one adversary: as before


def test_a_verdict_on_one_seed_says_one_seed():
    """audit.md and the console read "1 seeds as random effects" on every `--seeds 0` audit."""
    from types import SimpleNamespace

    from vflpriv.reports.audit import _verdict_line
    from vflpriv.tradeoff.leakage import SAMPLE_TEST_NAME

    def test(seeds):
        return SimpleNamespace(test=SAMPLE_TEST_NAME, n_targets=175, n_seeds=seeds, verdict="yes", leakage=0.2,
                               ci_low=0.1, ci_high=0.3, p_value=1e-5)

    assert "175 targets, 1 seed as random effects" in _verdict_line("gc", "finetune", test(1))
    assert "175 targets, 3 seeds as random effects" in _verdict_line("gc", "finetune", test(3))


def test_a_label_budget_beyond_the_aligned_samples_names_the_dataset(runner, tmp_path):
    """In a grid over digits and breast-cancer, "labeled=100 exceeds the 91 aligned samples" did not say which."""
    from cli_helpers import one_error_line, wrote_nothing

    with wrote_nothing(tmp_path):
        result = runner.invoke(app, ["evaluate", "--dataset", "breast-cancer", "--set", "partition.labeled=100",
                                     "--dry-run", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    one_error_line(result.output, "breast-cancer: labeled=100 exceeds the 91 aligned samples")


def test_an_audit_without_feature_attacks_does_not_say_none_applies():
    """`audit --attacks mc,gc` said "no feature attack applies" of splitnn, which the feature attacks do apply to."""
    from vflpriv.reports.features import feature_markdown

    text = "\n".join(feature_markdown({}))
    assert "no feature attack applies" not in text and "no feature attack ran" in text


def test_datasets_does_not_call_letter_present_where_its_reader_is_not_installed(runner, tmp_path, monkeypatch):
    """Without the data extra, `vflpriv datasets` said letter and satellite were present; `--dataset letter` then
    failed for want of the rdata package."""
    from vflpriv.data.catalog import status

    folder = tmp_path / "usr/lib/R/site-library/mlbench/data"
    folder.mkdir(parents=True)
    (folder / "LetterRecognition.rda").write_bytes(b"")
    (folder / "Satellite.rda").write_bytes(b"")
    monkeypatch.setenv("VFLPRIV_DATA", str(tmp_path))
    monkeypatch.setitem(sys.modules, "rdata", None)  # as if the data extra were not installed
    present, where, how = status("letter")
    assert not present and where == str(folder) and "pip install 'vflpriv[data]'" in how
    result = runner.invoke(app, ["datasets"])
    row = next(line for line in result.output.splitlines() if "│ letter" in line)
    assert "│ no " in row, row
    described = runner.invoke(app, ["describe", "letter"])  # neither 'missing' nor 'not here': unreadable
    assert "present but unreadable here" in described.output and "missing" not in described.output
    refused = runner.invoke(app, ["reproduce", "fedhssl-table6"])
    assert refused.exit_code == 2 and "whose files are here but cannot be read" in refused.output


def test_every_column_of_results_csv_is_named_in_the_evaluate_guide():
    """The README says the evaluate guide "explains every column"; 25 of results.csv's 87 were not named there."""
    import dataclasses
    import re
    from pathlib import Path

    from vflpriv.store.records import RunRecord
    from vflpriv.workflows.experiment import STORE_ONLY

    guide = (Path(__file__).resolve().parents[2] / "docs/guides/evaluate.md").read_text(encoding="utf-8")
    columns = [f.name for f in dataclasses.fields(RunRecord) if f.name not in STORE_ONLY]
    assert len(columns) > 60
    unnamed = [c for c in columns if not re.search(rf"(?<![\w-]){re.escape(c)}(?![\w-])", guide)]
    assert not unnamed, unnamed


def test_describe_of_a_dataset_without_partition_defaults_says_which_apply(runner):
    """`vflpriv describe digits` printed "default partition: {}"."""
    result = runner.invoke(app, ["describe", "digits"])
    assert result.exit_code == 0, result.output
    assert "default partition: {}" not in result.output
    assert "none of its own (vflpriv's: aligned_fraction 0.2, labeled 200, aux 80)" in result.output
    assert "default partition: {'labeled': 80, 'aux': 20}" in runner.invoke(app, ["describe", "breast-cancer"]).output
