"""Review last3 F1: the worst case under a defense where an attack that succeeded undefended has no successful run
is not measured: it says which attack it lacks and where, and credits the defense with nothing on the others alone."""

from __future__ import annotations

import json

import pandas as pd

from vflpriv.reports.audit import _label_markdown, audit_summary
from vflpriv.reports.features import defense_table, feature_defenses
from vflpriv.reports.leakage import prior_strength_tables
from vflpriv.store.records import RunRecord
from vflpriv.tradeoff.cap import cap_table
from vflpriv.tradeoff.worst_case import WORST, with_worst_case

CONFIG = json.dumps({"partition": {"adversary": 1}})
LEAKS = ("1" * 120 + "0" * 80, "1" * 20 + "0" * 180)  # 0.6 against a prior of 0.1: +0.5 undefended


def _run(attack: str, strength: float, seed: int, *, failed: bool = False, secret: str = "labels") -> dict:
    """One record of ``attack`` under iso at ``strength`` (0: undefended, leaking +0.5), at the prior when defended."""
    defended = strength > 0
    accuracy = float("nan") if failed else 0.1 if defended else 0.6
    extra = {} if defended else {"attack_hits": LEAKS[0], "prior_hits": LEAKS[1]}
    if secret == "features":  # the MSEs: the prior's 0.1, the attack's 0.1 defended, 0.05 undefended
        mse = float("nan") if failed else 0.1 if defended else 0.05
        extra = {"victim": "0", "adversary": "1", "feature_mse": mse, "prior_mse": 0.1,
                 "attack_errors": json.dumps([mse] * 4), "prior_errors": json.dumps([0.1] * 4), "n_targets": 4}
    return RunRecord(key=f"{attack}{strength}{seed}", method="m", dataset="d", attack=attack,
                     defense="iso" if defended else "none", phase="finetune", strength=strength, strength_axis="lambda",
                     strength_stronger="higher", strength_identity=0.0, num_classes=2, seed=seed, utility=0.8,
                     attack_accuracy=accuracy, prior_accuracy=0.1, leakage=accuracy - 0.1, config=CONFIG,
                     training_key=f"d{strength}{seed}", status="failed" if failed else "ok",
                     error="boom" if failed else "", secret=secret, **extra).to_dict()


def _records(fails, *, secret: str = "labels", attacks=("mc", "gc", "bli")) -> pd.DataFrame:
    """Every attack leaking undefended; under iso λ=1 and λ=25 at the prior, failed where ``fails(attack, strength,
    seed)``."""
    rows = [_run(a, 0.0, seed, secret=secret) for a in attacks for seed in (0, 1, 2)]
    rows += [_run(a, s, seed, failed=fails(a, s, seed), secret=secret) for a in attacks for s in (1.0, 25.0)
             for seed in (0, 1, 2)]
    return pd.DataFrame(rows)


def test_the_audit_s_worst_case_names_the_attack_that_failed_at_every_strength_and_credits_nothing():
    records = _records(lambda attack, s, seed: attack == "mc")
    summary = audit_summary(records, [], margin=0.02, context={})
    (worst,) = [d for d in summary["defenses"] if d["attack"] == WORST]
    assert worst["cap"] is None and worst["falls_to_prior"] is None
    assert worst["cap_status"] == "incomplete: strengths 1, 25 failed (no successful run of mc at 1, 25)"
    assert worst["falls_to_prior_text"] == "n/a: no successful run of mc at 1, 25 (see Failed runs)"
    row = "| worst-case | finetune | iso | λ=1, λ=25 | test utility | incomplete"
    assert row in "\n".join(_label_markdown(summary))


def test_the_table_s_worst_case_cap_is_incomplete_and_the_failed_attack_keeps_its_row():
    records = _records(lambda attack, s, seed: attack == "mc")
    caps = cap_table(with_worst_case(records))
    worst = caps[(caps["attack"] == WORST) & (caps["defense"] == "iso")]
    assert worst["cap"].isna().all()
    assert worst["status"].tolist() == ["incomplete: strengths 1, 25 failed (no successful run of mc at 1, 25)"]
    (labels,) = prior_strength_tables(records)
    said = {row[2]: row[-1] for row in labels.rows}
    assert said["mc"] == "n/a: every defended run failed"  # last3 F1: mc had no row at all
    assert said["gc"].startswith("λ=1 (")


def test_a_seed_the_strongest_attack_missed_leaves_that_seed_out_and_keeps_the_credit_where_all_were_measured():
    records = _records(lambda attack, s, seed: attack == "mc" and s == 25.0 and seed == 0)
    summary = audit_summary(records, [], margin=0.02, context={})
    (worst,) = [d for d in summary["defenses"] if d["attack"] == WORST]
    assert worst["cap_status"] == ("partial: seeds 0 left out (a strength failed for them; no successful run of mc "
                                   "at 25)")
    assert worst["seeds"] == 2 and worst["falls_to_prior_text"].startswith("λ=1 (")  # every attack measured at λ=1
    assert ("| 0.720 ± 0.000 (partial: seeds 0 left out (a strength failed for them; no successful run of mc at "
            "25)) |") in "\n".join(_label_markdown(summary))


def test_an_attack_that_never_succeeded_undefended_is_not_one_the_worst_case_must_take():
    records = _records(lambda attack, s, seed: attack == "mc")
    records.loc[(records["attack"] == "mc") & (records["defense"] == "none"), "status"] = "failed"
    summary = audit_summary(records, [], margin=0.02, context={})
    (worst,) = [d for d in summary["defenses"] if d["attack"] == WORST]
    assert worst["cap_status"] == "ok" and worst["falls_to_prior_text"].startswith("λ=1 (")


def test_the_feature_worst_case_names_the_attack_that_failed_under_the_defense():
    records = _records(lambda attack, s, seed: attack == "fia", secret="features", attacks=("fia", "fib", "fic"))
    baseline = records[records["defense"] == "none"]
    found = {d["attack"]: d for d in feature_defenses(records[records["defense"] != "none"], baseline=baseline)}
    assert found[WORST]["cap"] is None
    assert found[WORST]["falls_to_prior_text"] == "n/a: no successful run of fia at 1, 25"
    assert found["fib"]["cap"] is not None


def test_without_undefended_runs_an_attack_that_succeeded_at_one_strength_is_missed_at_another():
    """evaluate --defense iso prints its CAP from its own records, which hold no undefended run."""
    records = _records(lambda attack, s, seed: attack == "gc" and s == 25.0, attacks=("mc", "gc"))
    caps = cap_table(with_worst_case(records[records["defense"] != "none"]))
    (status,) = caps.loc[caps["attack"] == WORST, "status"]
    assert status == "incomplete: strengths 25 failed (no successful run of gc at 25)"


def test_an_attack_not_run_at_a_strength_leaves_no_gap_there():
    """The audit runs an acting attack (mc-active) at a defense's weakest strength only, the passive attacks standing
    for it elsewhere (docs/guides/auditing.md): a strength it did not run at is no failure (an audit store read so)."""
    records = _records(lambda attack, s, seed: False)
    records = records[~((records["attack"] == "mc") & (records["strength"] == 25.0))]
    summary = audit_summary(records, [], margin=0.02, context={})
    (worst,) = [d for d in summary["defenses"] if d["attack"] == WORST]
    assert worst["cap_status"] == "ok" and worst["falls_to_prior_text"].startswith("λ=1 (")


def test_a_feature_attack_failing_for_one_of_two_adversaries_is_named_with_it():
    """The feature worst case takes every adversary: one adversary's successful runs do not stand for another's."""
    records = pd.concat([_records(lambda attack, s, seed: attack == "fia" and adversary == "server",
                                  secret="features", attacks=("fia", "fib")).assign(adversary=adversary)
                         for adversary in ("1", "server")], ignore_index=True)
    caps = cap_table(with_worst_case(records))
    (status,) = caps.loc[(caps["attack"] == WORST) & (caps["defense"] == "iso"), "status"]
    assert status == "incomplete: strengths 1, 25 failed (no successful run of fia by server at 1, 25)"


def test_a_partial_cap_carries_its_status_in_every_table_that_shows_it(tmp_path):
    """A CAP over fewer seeds than ran printed its number alone in ``vflpriv table``'s CAP tables, the terminal's and
    the report's feature table (audit.md already said why): every cell of it now says which seeds and why."""
    from rich.console import Console

    from vflpriv.reports.paper_tables import cap_tables
    from vflpriv.reports.tables import cap_rich_table, mean_std

    caps = cap_table(with_worst_case(_records(lambda attack, s, seed: attack == "mc" and s == 25.0 and seed == 0)))
    status = "partial: seeds 0 left out (a strength failed for them; no successful run of mc at 25)"
    cells = [c for t in cap_tables(caps) if "worst-case" in t.title for row in t.rows for c in row[1:]]
    assert cells == [f"0.720 ± 0.000 ({status})"]
    console = Console(width=400, record=True)
    console.print(cap_rich_table(caps))
    assert f"0.720 ± 0.000 ({status})" in console.export_text()
    features = _records(lambda attack, s, seed: attack == "fia" and s == 25.0 and seed == 0, secret="features",
                        attacks=("fia", "fib", "fic"))
    found = feature_defenses(features[features["defense"] != "none"], baseline=features[features["defense"] == "none"])
    (worst,) = [d for d in found if d["attack"] == WORST]
    (row,) = [r for r in defense_table(found).rows if r[2] == WORST]
    assert row[-2] == f"{mean_std(worst['cap'], worst['cap_std'], n=2)} ({worst['cap_status']})"
    assert worst["cap_status"].startswith("partial: seeds 0 left out")


def test_a_cap_cell_without_a_number_never_reads_ok_and_an_old_summary_s_cap_reads_as_before():
    """Review l5: a NaN CAP whose status is "ok" (0/0 MSEs) printed "ok" as its score; a feature row of an audit.json
    written before ``cap_status`` existed printed its CAP with "(n/a)" beside it."""
    from vflpriv.reports.tables import cap_cell

    assert cap_cell(float("nan"), float("nan"), n=3, status="ok") == "n/a"
    old = {"setting": "", "adversary": "0", "victim": "1", "attack": "fi-decoder", "phase": "finetune",
           "defense": "iso", "axis": "lambda", "strengths": [1.0], "cap": 0.72, "cap_std": 0.01, "seeds": 3,
           "falls_to_prior_text": "λ=1"}
    (row,) = defense_table([old]).rows
    assert "0.720 ± 0.010" in row and not any("(n/a)" in str(c) for c in row)


def test_the_undefended_worst_case_of_a_seed_whose_attack_failed_is_not_the_others_max():
    """lo4's note: an attack that succeeded undefended at seeds 0 and 2 but failed at seed 1 leaves seed 1's undefended
    worst case unmeasured (the max of the others would understate the baseline every defense is judged against)."""
    records = _records(lambda attack, s, seed: False)
    bare = (records["attack"] == "mc") & (records["defense"] == "none") & (records["seed"] == 1)
    records.loc[bare, ["status", "attack_accuracy"]] = ["failed", float("nan")]
    worst = with_worst_case(records)
    undefended = worst[(worst["attack"] == WORST) & (worst["defense"] == "none")].set_index("seed")
    assert undefended.loc[1, "status"] == "failed" and undefended.loc[1, "unmeasured"] == "mc"
    assert (undefended.loc[[0, 2], "status"] == "ok").all()
    caps = cap_table(worst)
    (status,) = caps[(caps["attack"] == WORST) & (caps["defense"] == "none")]["status"]
    assert status == "partial: seeds 1 left out (their run failed; no successful run of mc)"  # review l7 7
