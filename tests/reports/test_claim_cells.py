"""Review eps F4: a strength's epsilon is shown only where every seed recorded one, and as the max over the seeds (each
training must hold its own claim), never a mean that skips the seeds without one."""

import pandas as pd
from rich.console import Console

from vflpriv.reports.paper_tables import _strength_cell
from vflpriv.reports.tables import claim_cell, strength_rows, strength_table
from vflpriv.tradeoff.cap import strength_summary

NAN = float("nan")
BASE = {"method": "m", "dataset": "d", "attack": "mc", "defense": "dp-gaussian", "phase": "finetune", "status": "ok",
        "utility": 0.5, "attack_accuracy": 0.3, "prior_accuracy": 0.1, "utility_metric": "accuracy",
        "strength_axis": "sigma", "strength_stronger": "higher"}


def _summary():
    rows = [{**BASE, "strength": 4.0, "seed": 0, "epsilon": 2.0, "epsilon_delta": 1e-5},
            {**BASE, "strength": 4.0, "seed": 1, "epsilon": NAN, "epsilon_delta": NAN},
            {**BASE, "strength": 8.0, "seed": 0, "epsilon": 1.0, "epsilon_delta": 1e-5},
            {**BASE, "strength": 8.0, "seed": 1, "epsilon": 1.5, "epsilon_delta": 1e-5}]
    return strength_summary(pd.DataFrame(rows)).set_index("strength", drop=False)


def test_a_row_claims_the_max_over_seeds_only_where_every_seed_claims():
    summary = _summary()
    assert [claim_cell(r) for _, r in summary.iterrows()] == ["n/a (1 of 2 seeds claim)", "1.5 at δ 1e-05"]
    assert [_strength_cell(r) for r in summary.itertuples()] == [
        "0.300 / 0.500 (ε n/a (1 of 2 seeds claim))", "0.300 / 0.500 (ε 1.5 at δ 1e-05)"]
    console = Console(record=True, width=250)
    console.print(strength_table(summary))
    text = console.export_text()
    assert "n/a (1 of 2 seeds claim)" in text and "1.5 at δ 1e-05" in text and "2 at δ 1e-05" not in text


def test_strength_rows_csv_holds_no_partial_row_s_max():
    """strength_rows.csv's epsilon_max is empty where a seed claims nothing, not the claiming seeds' max (review eps2
    G5: ``claim_cell`` re-checks the count, the CSV does not)."""
    rows = strength_rows(_summary()).set_index("strength")
    assert pd.isna(rows.loc[4.0, "epsilon_max"]) and pd.isna(rows.loc[4.0, "epsilon_delta_max"])
    assert rows.loc[8.0, "epsilon_max"] == 1.5 and rows.loc[4.0, "epsilon_seeds"] == 1


def test_a_table_showing_an_epsilon_notes_its_noise_assumption_and_none_without():
    """Review fe2 R5: under any table with a claimed epsilon, one footnote line says what it assumes of the noise."""
    from vflpriv.reports.paper_tables import strength_tables
    from vflpriv.reports.tables import EPSILON_NOTE

    summary = _summary()
    (claimed,) = strength_tables(summary.assign(variant=""))
    assert claimed.note == EPSILON_NOTE and EPSILON_NOTE in claimed.markdown()
    (none,) = strength_tables(summary.assign(variant="", epsilon_seeds=0))
    assert none.note == ""
    console = Console(record=True, width=250)
    console.print(strength_table(summary))
    assert EPSILON_NOTE in " ".join(console.export_text().split())


def test_seeded_and_secure_noise_runs_are_variants_of_their_own():
    """Review fe2 R5: a cell never pools runs whose noise came from the seed with runs whose noise did not."""
    import json

    from vflpriv.tradeoff.variants import with_variants

    def config(options):
        return json.dumps({"defenses": [{"name": "label-dp", "strength": 2.0, "options": options}]})

    frame = pd.DataFrame([{**BASE, "seed": 0, "config": config({})},
                          {**BASE, "seed": 0, "config": config({"secure_noise": True})}])
    assert with_variants(frame)["variant"].nunique() == 2
