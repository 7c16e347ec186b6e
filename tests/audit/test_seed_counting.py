"""Each seed counts once in every verdict: the audit's canary-free control trainings measure what the canaries cost
and never enter a leakage test, and ``audit.md``/``audit.json``, ``report.html`` and ``vflpriv table`` read the same
verdict numbers from one store."""

from __future__ import annotations

import html
import json
import re
from collections import Counter

import pandas as pd
import pytest
from typer.testing import CliRunner

from vflpriv.cli import app
from vflpriv.tradeoff.leakage import leakage_test
from vflpriv.workflows.audit import AuditConfig, audit_grid

SMALL = {"model": {"hidden": 32, "out_dim": 16}, "finetune": {"epochs": 2, "batch_size": 32},
         "partition": {"labeled": 60, "aux": 20}}


@pytest.mark.parametrize(("method", "phases"), [("splitnn", ["finetune"]), ("vflhlp", ["pretrain"]),
                                                ("vflhlp", ["finetune", "pretrain"])])
def test_every_leakage_setting_of_an_audit_grid_holds_each_seed_once(method, phases):
    """The issue's case: vflhlp's label-reading pretraining attacked alone had its control counted as two more
    seeds. Runs with a prior (the leakage tests' records) are unique per setting and seed; the controls run once per
    seed, untuned and without a prior."""
    cfg = AuditConfig.model_validate({**SMALL, "method": {"name": method}, "seeds": [0, 1],
                                      "audit": {"attacks": ["mc"], "defenses": [{"name": "none"}], "phases": phases}})
    runs, _ = audit_grid(cfg)
    measured = Counter((r.attack.name, r.attack.phase, json.dumps([d.model_dump() for d in r.defenses]), r.seed)
                       for r in runs if r.attack.prior != "none")
    assert set(measured.values()) == {1}
    controls = [r for r in runs if r.attack.prior == "none"]
    assert sorted(r.seed for r in controls) == [0, 1]
    assert all(r.partition.canaries == 0 and not r.defenses and not r.attack.tune for r in controls)


def test_a_leakage_test_refuses_a_seed_counted_twice():
    row = {"status": "ok", "attack_accuracy": 0.8, "prior_accuracy": 0.7, "attack_hits": "1101", "prior_hits": "1001"}
    records = pd.DataFrame([{**row, "seed": 0}, {**row, "seed": 1}, {**row, "seed": 1}])
    with pytest.raises(ValueError, match="seed.* 1 appear more than once"):
        leakage_test(records)
    no_prior = pd.DataFrame([{**row, "seed": 0}, {**row, "seed": 1}, {**row, "seed": 1, "prior_accuracy": float("nan"),
                                                                       "prior_hits": ""}])
    assert leakage_test(no_prior).n_seeds == 2  # a record without a prior measures no leakage


def _report_verdicts(page: str) -> dict[str, tuple[str, str, str]]:
    """attack -> (leakage, CI low, CI high) as the report prints them in its verdict list."""
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    found = re.findall(r"(?:^|\n|\(finetune\)[^,]*, )([\w-]+): leaks beyond the prior: \w[\w ]*\(leakage ([+-][\d.]+), "
                       r"95% CI \[([+-][\d.]+), ([+-][\d.]+)\]", text)
    return {a: (leak, low, high) for a, leak, low, high in found}


def test_audit_md_report_and_table_give_the_same_verdict_numbers_from_one_store(tmp_path, monkeypatch):
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "audit"
    runner = CliRunner()
    result = runner.invoke(app, [
        "audit", "--method", "splitnn", "--attacks", "mc,gc", "--defenses", "none", "--seeds", "0,1",
        "--no-tune-attacks", "--out", str(out), "--jobs", "1", "--set", "finetune.epochs=2", "--set", "model.hidden=32",
        "--set", "model.out_dim=16", "--set", "partition.labeled=64", "--set", "partition.aux=20",
        "--set", "audit.prior=aux", "--set", "audit.prior_epochs=20"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "audit.json").read_text())
    assert summary["canaries"]["canaries"] == 8  # planted, so the controls ran
    verdicts = {v["attack"]: v for v in summary["verdicts"] if v["attack"] in ("mc", "gc")}
    assert {v["n_seeds"] for v in verdicts.values()} == {2}
    audit_md = (out / "audit.md").read_text()
    assert "3 seeds" not in audit_md and "4 seeds" not in audit_md and "2 seeds as random effects" in audit_md

    report = runner.invoke(app, ["report", str(out), "--out", str(tmp_path / "report")])
    assert report.exit_code == 0, report.output
    shown = _report_verdicts((tmp_path / "report" / "report.html").read_text())
    table = runner.invoke(app, ["table", str(out), "--out", str(tmp_path / "tables")])
    assert table.exit_code == 0, table.output
    rows = pd.read_csv(tmp_path / "tables" / "leakage.csv")
    for attack, v in verdicts.items():
        expected = (f"{v['leakage']:+.3f}", f"{v['ci_low']:+.3f}", f"{v['ci_high']:+.3f}")
        assert shown[attack] == expected, (attack, shown)
        row = rows[(rows["attack"] == attack) & (rows["defense"] == "none")]
        assert len(row) == 1 and int(row["seeds"].iloc[0]) == 2
        assert (f"{row['leakage'].iloc[0]:+.3f}", f"{row['ci_low'].iloc[0]:+.3f}",
                f"{row['ci_high'].iloc[0]:+.3f}") == expected
        assert f"{v['leakage']:+.3f} [{v['ci_low']:+.3f}, {v['ci_high']:+.3f}]" in audit_md


def test_the_canaries_cost_compares_honest_trainings_once_each_and_the_controls_enter_no_verdict():
    """With canaries: the honest undefended trainings (an acting attack's own federation, mc-active's, has another
    utility); without: the canary-free controls (no prior, so no leakage); every training counted once."""
    from vflpriv.reports.canaries import canary_controls, canary_summary

    def row(seed, *, canaries, utility, attack="gc", under=False, prior="simsiam"):
        return {"key": f"{attack}{seed}{canaries}{under}", "training_key": f"{seed}{canaries}{under}", "method": "splitnn",
                "dataset": "digits", "attack": attack, "defense": "none", "phase": "finetune", "strength": 0.0,
                "seed": seed, "status": "ok", "utility": utility, "canaries": canaries, "training_under_attack": under,
                "attack_accuracy": 0.8, "prior_accuracy": 0.7 if prior != "none" else float("nan"),
                "config": json.dumps({"seed": seed, "attack": {"prior": prior}}), "strength_axis": "lambda",
                "strength_stronger": "higher", "epsilon": float("nan"), "canary_counts": "", "canary_guesses": 0,
                "num_classes": 10}

    frame = pd.DataFrame([row(s, canaries=25, utility=0.90) for s in (0, 1)]
                         + [row(s, canaries=25, utility=0.90, attack="mc") for s in (0, 1)]
                         + [row(s, canaries=25, utility=0.50, attack="mc-active", under=True) for s in (0, 1)]
                         + [row(s, canaries=0, utility=0.94, prior="none") for s in (0, 1)])
    cost = canary_summary(frame)
    assert cost["utility_with"] == {"mean": 0.90, "std": 0.0, "trainings": 2}
    assert cost["utility_without"]["mean"] == pytest.approx(0.94) and cost["utility_without"]["trainings"] == 2
    assert canary_controls(frame).tolist() == [False] * 6 + [True] * 2
