"""The empirical-epsilon part of a report and of ``vflpriv table``: each claim's check worded by what its canaries can
show (its cap, "untestable with N canaries", "claim rejected at the 95% level" with the counts), every epsilon with its
delta, a defense's option variants in rows of their own."""

from __future__ import annotations

import json

import pandas as pd

from vflpriv.common.empirical_epsilon import cap
from vflpriv.reports.canaries import canary_summary, epsilon_tables
from vflpriv.tradeoff.variants import with_variants


def _row(attack: str, seed: int, counts, *, strength: float, epsilon: float, delta: float = 0.0,
         defense: str = "label-dp", prior: str = "uniform", canaries: int = 30, classes: int = 10) -> dict:
    config = {"method": {"name": "splitnn"}, "seed": seed, "attack": {"name": attack},
              "defenses": [{"name": defense, "strength": strength, "sweep": True, "options": {"prior": prior}}]}
    return dict(method="splitnn", dataset="digits", defense=defense, phase="finetune", strength=strength,
                attack=attack, seed=seed, status="ok", canaries=canaries, canary_counts=json.dumps(counts),
                num_classes=classes, epsilon=epsilon, epsilon_delta=delta, epsilon_lower_delta=delta,
                strength_axis="epsilon", strength_stronger="lower", notes="", training_key=f"{strength}{seed}{prior}",
                utility=0.5, config=json.dumps(config))


def _runs() -> pd.DataFrame:
    """label-dp at 8 (above the cap of 60 canaries), at 1 read perfectly (rejected), at 2 at chance (not rejected);
    two seeds of 30 canaries, gc and mc planned."""
    rows = []
    for seed in (0, 1):
        for eps, gc in ((8.0, [[30, 30]]), (1.0, [[30, 30]]), (2.0, [[30, 3]])):
            rows += [_row("gc", seed, gc, strength=eps, epsilon=eps), _row("mc", seed, [[30, 3]], strength=eps,
                                                                          epsilon=eps)]
    return pd.DataFrame(rows)


def test_each_claim_s_line_says_its_cap_and_what_the_canaries_can_show():
    summary = canary_summary(_runs())
    lines = {(r["strength"], r["attack"]): r["line"] for r in summary["rows"]}
    ceiling = cap(canaries=60, classes=10, menu=1, attacks=2)
    assert 4 < ceiling < 8
    assert f"cap {ceiling:.2f} with 60 canaries" in lines[(8.0, "worst-case")]
    assert "claimed epsilon 8.00 (pure): untestable with 60 canaries" in lines[(8.0, "worst-case")]
    assert "claimed epsilon 1.00 (pure): claim rejected at the 95% level (Holm over the report's 2 claim tests): gc guessed " \
        "60 of 60" in lines[(1.0, "worst-case")]
    assert "claimed epsilon 2.00 (pure): not rejected" in lines[(2.0, "worst-case")]
    assert "worst case over the 2 planned attacks (gc, Steinke's bound; each attack at 5%/2)" in lines[(1.0, "worst-case")]
    assert all("claim" not in line for (s, a), line in lines.items() if a != "worst-case")  # one attack rejects nothing
    assert [r["strength"] for r in summary["rejected"]] == [1.0]


def test_a_claim_with_a_delta_is_printed_with_it():
    runs = [_row(a, 0, c, strength=9.0, epsilon=1.0, delta=1e-5, defense="dp-gaussian")
            for a, c in (("gc", [[30, 30]]), ("mc", [[30, 3]]))]
    (worst,) = [r for r in canary_summary(pd.DataFrame(runs))["rows"] if r["attack"] == "worst-case"]
    assert "(95%, at delta 1e-05)" in worst["line"] and "claimed epsilon 1.00 at delta 1e-05" in worst["line"]


def test_the_table_has_a_cap_row_a_claim_row_with_its_check_and_bold_only_for_a_rejected_claim():
    (table, *_) = epsilon_tables(_runs())
    cells = {row[0]: row[1:] for row in table.rows}
    assert table.columns[1:] == ["epsilon=8", "epsilon=2", "epsilon=1"]  # weak to strong
    assert set(cells) == {"gc", "mc", "worst case (each at 5%/2)", "cap (every guess right)", "claimed ε"}
    assert cells["claimed ε"][0] == "8.00 (pure): untestable with 60 canaries" and cells["claimed ε"][2].startswith(
        "1.00 (pure): rejected")
    claim_row = len(table.rows) - 1
    assert table.best == {(claim_row, 3)}


def test_label_dp_s_uniform_and_two_stage_variants_are_rows_of_their_own():
    runs = _runs()
    two_stage = runs.assign(config=[c.replace('"uniform"', '"two-stage"') for c in runs["config"]],
                            training_key=runs["training_key"] + "2")
    tables = epsilon_tables(with_variants(pd.concat([runs, two_stage], ignore_index=True)))
    titles = [t.title for t in tables if t.title.startswith("Empirical")]
    assert len(titles) == 2 and any("prior=two-stage" in t for t in titles) and any("prior=uniform" in t for t in titles)


def test_a_feature_attack_of_the_audit_names_no_variant_of_the_label_attacks_epsilon_table():
    """An audit runs feature attacks on the same trainings: their settings (attack.adversary, attack.victim) vary across
    the cell, but they guess no canary and their roles name no label attack's variant (``with_variants`` per secret), so
    the label attacks' epsilon table is not titled by them."""
    runs = _runs()
    feature = runs.iloc[:2].assign(attack="fi-decoder", secret="features", canary_counts="", config=[
        json.dumps(json.loads(c) | {"attack": {"name": "fi-decoder", "adversary": 0, "victim": 1}})
        for c in runs["config"].iloc[:2]])
    frame = with_variants(pd.concat([runs.assign(secret="labels"), feature], ignore_index=True))
    (table, *_) = [t for t in epsilon_tables(frame) if t.title.startswith("Empirical")]
    assert table.title.endswith("label-dp (finetune)"), table.title
