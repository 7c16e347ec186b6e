"""One report, one 5%: the audit's report decides the attacks' claims and the auditor's with one Holm over their
union (``tradeoff.epsilon.holm_over``); two families at 5% each could reject a true claim with chance near 10%."""

from __future__ import annotations

import pandas as pd

from vflpriv.tradeoff.auditing import auditor_table
from vflpriv.tradeoff.epsilon import epsilon_table, holm, holm_over


def _record(seed: int) -> dict:
    """gc's and the auditor's canaries alike: 52 of 100 right a seed, pooled 104 of 200, claim 2 at delta 1e-5:
    adjusted p 0.034 each, below 5% alone, above 5%/2."""
    return dict(method="m", dataset="d", defense="dp-gaussian", phase="finetune", strength=4.0, attack="gc",
                seed=seed, status="ok", canaries=100, num_classes=10, epsilon=2.0, epsilon_delta=1e-5,
                epsilon_lower_delta=1e-5, strength_axis="sigma", strength_stronger="higher",
                training_key=f"t{seed}", canary_counts="[[100, 52]]", auditor="gradient-lrt",
                auditor_counts="[[100, 52]]", utility=0.5, canary_guesses=100)


def test_holm_over_two_tables_decides_their_union_as_one_family():
    a = pd.DataFrame({"testable": [True, False], "p_value": [0.04, float("nan")], "rejected": [True, False]})
    b = pd.DataFrame({"testable": [True], "p_value": [0.03], "rejected": [True]})
    joint_a, joint_b = holm_over(a, b)
    assert holm([0.04, 0.03]) == [False, False]  # 0.03 > 0.05 / 2
    assert joint_a["rejected"].tolist() == [False, False] and joint_b["rejected"].tolist() == [False]
    assert joint_a["holm_family"].tolist() == [2, 2] and joint_b["holm_family"].tolist() == [2]
    assert a["rejected"].tolist() == [True, False]  # the given tables are unchanged
    (alone,) = holm_over(b)
    assert alone["rejected"].tolist() == [True] and alone["holm_family"].tolist() == [1]


def test_the_audit_report_rejects_no_claim_that_only_two_separate_families_would():
    from vflpriv.reports.canaries import canary_markdown, canary_summary

    frame = pd.DataFrame([_record(0), _record(1)])
    attacks, auditor = epsilon_table(frame), auditor_table(frame)
    worst = attacks[attacks["attack"] == "worst-case"].iloc[0]
    assert 0.025 < worst["p_value"] < 0.05 and 0.025 < auditor["p_value"].iloc[0] < 0.05
    assert bool(worst["rejected"]) and bool(auditor["rejected"].iloc[0])  # each family alone rejects its claim
    summary = canary_summary(frame)
    assert summary["rejected"] == [] and not any(r["rejected"] for r in summary["auditor"])
    (line,) = [r["line"] for r in summary["auditor"]]
    assert "not rejected" in line and "Holm over the report's 2 claim tests, the attacks' and the auditor's" in line
    assert "every claim this report checks, the attacks' and the auditor's together" in "\n".join(
        canary_markdown(summary))
