"""The Table IV benchmark's report: the ordering verdict and the paired differences it prints."""

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "table_iv.py"


def load_table_iv():
    spec = importlib.util.spec_from_file_location("table_iv", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_ordering_lines_report_means_and_paired_differences():
    table_iv = load_table_iv()
    cells = {
        "splitnn": [0.60, 0.70],
        "local-simsiam": [0.62, 0.71],
        "fedhssl-simsiam": [0.65, 0.70],
    }
    lines = table_iv.ordering_lines(lambda m, n: (cells[m], 0.001) if m in cells else None, [200])
    (line,) = [x for x in lines if x.startswith("- ")]
    assert "FedHSSL 0.675, FedLocal 0.665, FedSplitNN 0.650: **held**" in line
    assert "FedHSSL − FedLocal +0.010 ± 0.028 (1/2 seeds > 0)" in line  # diffs +0.03, -0.01
    assert "FedLocal − FedSplitNN +0.015 ± 0.007 (2/2 seeds > 0)" in line  # diffs +0.02, +0.01


def test_best_lr_picks_the_highest_mean_and_keeps_its_seeds():
    table_iv = load_table_iv()
    rows = {("splitnn", 200, lr, s): {"utility": str(u), "metric": "accuracy"}
            for lr, us in {0.001: [0.5, 0.9], 0.003: [0.8, 0.7]}.items() for s, u in enumerate(us)}
    text = table_iv.tables("toy", rows, ["splitnn"], [200], [0.001, 0.003], {200: 0.2}, [0, 1], "")
    assert "0.750 ± 0.071 (lr 0.003)" in text
    assert "| FedSplitNN | **0.700 ± 0.283** |" in text
