"""What leaked, from records: per setting and strength the attack's and the prior's accuracy, the leakage (attack -
prior) with its 95% interval and the verdict of the audit's test (``tradeoff.leakage``); and, from the undefended
records, each attack's verdict, the worst case being the attack with the largest leakage."""

from __future__ import annotations

import math

import pandas as pd

from vflpriv.reports.paper_tables import Table, natural
from vflpriv.tradeoff.cap import WORST, strength_label
from vflpriv.tradeoff.leakage import MARGIN, leakage_test, measured, verdict_rule
from vflpriv.tradeoff.variants import with_variants

CELL = ["method", "dataset", "attack", "defense", "phase"]


def _num(value: float, fmt: str = "{:.3f}") -> str:
    return "n/a" if value is None or not math.isfinite(value) else fmt.format(value)


def leakage_rows(results: pd.DataFrame, *, margin: float = MARGIN) -> pd.DataFrame:
    """One row per (method, dataset, attack, defense, phase, variant, strength) whose successful records have a prior:
    the means, the leakage, its interval and p, the verdict and the test's name. Variants are named among these
    records (``tradeoff.variants``), so a run that measures no leakage (the audit's canary-free controls) neither
    enters a test nor renames the others; each seed counts once in a row."""
    ok = measured(results) if len(results) else results
    ok = ok[ok["attack"] != WORST] if len(ok) else ok
    if ok.empty:
        return pd.DataFrame()
    ok = with_variants(ok.drop(columns=["variant"], errors="ignore"))
    rows = []
    for keys, group in ok.groupby([*CELL, "variant", "strength"], sort=False):
        test = leakage_test(group, margin=margin)
        rows.append({**dict(zip([*CELL, "variant", "strength"], keys)), "axis": str(group["strength_axis"].iloc[0])
                     if "strength_axis" in group else "lambda", "attack_accuracy": test.attack_mean,
                     "prior_accuracy": test.prior_mean, "leakage": test.leakage, "ci_low": test.ci_low,
                     "ci_high": test.ci_high, "p_value": test.p_value, "verdict": test.verdict,
                     "seeds": test.n_seeds, "test": test.test})
    return pd.DataFrame(rows)


def leakage_table(rows: pd.DataFrame, *, margin: float = MARGIN) -> Table | None:
    """The rows as one table, settings in natural order, strengths in the order recorded."""
    if rows.empty:
        return None
    ordered = sorted(rows.to_dict("records"), key=lambda r: [natural(str(r[c])) for c in CELL])
    cells = [[" / ".join(str(r[c]) for c in CELL),
              "undefended" if r["defense"] == "none" else strength_label(r["axis"], r["strength"]),
              _num(r["attack_accuracy"]), _num(r["prior_accuracy"]), _num(r["leakage"], "{:+.3f}"),
              f"[{_num(r['ci_low'], '{:+.3f}')}, {_num(r['ci_high'], '{:+.3f}')}]", r["verdict"], str(r["seeds"])]
             for r in ordered]
    return Table("Leakage beyond the adversary's prior (attack accuracy - prior accuracy on the same targets)",
                 ["method / dataset / attack / defense / phase", "strength", "attack", "prior", "leakage", "95% CI",
                  "leaks?", "seeds"], cells, set(), note=f"Verdicts: {verdict_rule(margin)}.")


def verdicts(rows: pd.DataFrame) -> list[dict]:
    """Per (method, dataset, phase), each attack's undefended verdict and the worst case: the attack with the largest
    leakage among those that did not fail (chosen on the targets' labels: the auditor's worst case)."""
    if rows.empty:
        return []
    plain = rows[rows["defense"] == "none"]
    found = []
    for (method, dataset, phase), part in plain.groupby(["method", "dataset", "phase"], sort=False):
        trained = part[(part["verdict"] != "attack failed") & part["leakage"].notna()]
        worst = trained.loc[trained["leakage"].idxmax()] if len(trained) else None
        for _, r in part.iterrows():
            found.append({"setting": f"{method} / {dataset} ({phase})", "attack": r["attack"],
                          "verdict": r["verdict"], "leakage": r["leakage"], "ci": (r["ci_low"], r["ci_high"]),
                          "worst": worst is not None and r["attack"] == worst["attack"]})
    return found
