"""Review hunt2 N1: a table about a secret shows only that secret's epsilon: a feature attack's rows never show the
label epsilon of a label defense, and do show embedding-dp's feature epsilon."""

import pandas as pd
from rich.console import Console

from vflpriv.reports.paper_tables import strength_tables as paper_tables
from vflpriv.reports.tables import strength_tables
from vflpriv.tradeoff.cap import strength_summary

NAN = float("nan")
BASE = {"method": "splitnn", "dataset": "d", "attack": "fi-decoder", "phase": "finetune", "status": "ok",
        "utility": 0.5, "attack_accuracy": 0.14, "prior_accuracy": 0.08, "feature_mse": 0.14, "prior_mse": 0.08,
        "utility_metric": "accuracy", "strength_stronger": "higher", "seed": 0, "secret": "features",
        "adversary": "0", "victim": "1", "epsilon": NAN, "epsilon_delta": NAN, "epsilon_features": NAN,
        "epsilon_features_delta": NAN}
LABEL_DP = {**BASE, "defense": "label-dp", "strength_axis": "epsilon", "strength_stronger": "lower", "strength": 1.0,
            "epsilon": 1.0, "epsilon_delta": 0.0}
EMBEDDING_DP = {**BASE, "defense": "embedding-dp", "strength_axis": "sigma", "strength": 0.5,
                "epsilon_features": 41.6, "epsilon_features_delta": 1e-5}
LABEL_ROW = {**BASE, "attack": "mc", "secret": "labels", "adversary": "", "victim": "", "defense": "label-dp",
             "strength_axis": "epsilon", "strength_stronger": "lower", "strength": 1.0, "epsilon": 1.0,
             "epsilon_delta": 0.0}


def _texts(rows: list[dict]) -> tuple[str, str]:
    """The terminal tables' text and the paper tables' markdown of ``rows``."""
    summary = strength_summary(pd.DataFrame(rows))
    console = Console(record=True, width=300)
    for table in strength_tables(summary):
        console.print(table)
    markdown = "\n".join(t.markdown() for t in paper_tables(summary.assign(variant="")))
    return console.export_text(), markdown


def test_a_feature_attack_under_label_dp_shows_no_epsilon():
    terminal, markdown = _texts([LABEL_DP])
    assert "ε spent" not in terminal and "(pure)" not in terminal
    assert "ε" not in markdown.replace("ε=", "") and "(pure)" not in markdown


def test_a_feature_attack_under_embedding_dp_shows_the_feature_epsilon():
    terminal, markdown = _texts([EMBEDDING_DP])
    assert "ε spent" in terminal and "41.6 at δ 1e-05" in terminal
    assert "(ε 41.6 at δ 1e-05)" in markdown


def test_a_label_attack_beside_keeps_its_label_epsilon():
    terminal, markdown = _texts([LABEL_DP, LABEL_ROW])
    assert terminal.count("1 (pure)") == 1 and markdown.count("(ε 1 (pure))") == 1
