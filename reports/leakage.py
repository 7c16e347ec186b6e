"""What leaked, from records: per setting and strength the attack's and the prior's accuracy, the leakage (attack -
prior) with its 95% interval and the verdict of the audit's test (``tradeoff.leakage``); and, from the undefended
records, each attack's verdict, the worst case being the attack with the largest leakage."""

from __future__ import annotations

import math

import pandas as pd

from vflpriv.reports.paper_tables import Table, natural
from vflpriv.tradeoff.cap import WORST, strength_label
from vflpriv.tradeoff.leakage import FEATURE_MARGIN, MARGIN, falls_to_prior, leakage_test, verdict_rule

CELL = ["method", "dataset", "attack", "defense", "phase"]


def _num(value: float, fmt: str = "{:.3f}") -> str:
    return "n/a" if value is None or not math.isfinite(value) else fmt.format(value)


def leakage_rows(results: pd.DataFrame, *, margin: float = MARGIN) -> pd.DataFrame:
    """One row per (method, dataset, attack, defense, phase, strength) whose successful records have a prior: the
    means, the leakage, its interval and p, the verdict and the test's name."""
    ok = results[(results["status"] == "ok") & results["prior_accuracy"].notna()] if len(results) else results
    if ok.empty or (ok["attack"] == WORST).all():
        return pd.DataFrame()
    rows = []
    for keys, group in ok[ok["attack"] != WORST].groupby([*CELL, "strength"], sort=False):
        test = leakage_test(group, margin=margin)
        rows.append({**dict(zip([*CELL, "strength"], keys)), "axis": str(group["strength_axis"].iloc[0])
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


def prior_strength_tables(results: pd.DataFrame, *, margin: float = MARGIN,
                          feature_margin: float = FEATURE_MARGIN) -> list[Table]:
    """Per secret, the weakest strength of each swept defense at which each attack falls to the adversary's prior
    (``tradeoff.leakage.falls_to_prior``: mean leakage over the seeds within the margin; for features within a share of
    the prior's MSE), with the leakage and utility there; one table per secret present."""
    ok = results[(results["status"] == "ok") & (results["defense"] != "none") & (results["attack"] != WORST)]
    if ok.empty:
        return []
    secrets = ok["secret"] if "secret" in ok else pd.Series("labels", index=ok.index)
    tables = []
    for secret in ("labels", "features"):
        part = ok[secrets == secret]
        keys = [*CELL, *(["victim"] if secret == "features" else [])]
        rows = []
        for values, group in part.groupby(keys, sort=False):
            falls = falls_to_prior(group, margin=margin, feature_margin=feature_margin)
            axis = str(group["strength_axis"].iloc[0]) if "strength_axis" in group else "lambda"
            unit = " MSE" if secret == "features" else ""
            where = (f"{strength_label(falls['axis'], falls['strength'])} (leakage {falls['leakage']:+.4f}{unit}, "
                     f"utility {falls['utility']:.3f})" if falls else "not within " + ", ".join(
                         strength_label(axis, s) for s in sorted(group["strength"].unique())))
            rows.append([*(str(v) for v in values), where])
        if rows:
            rule = (f"mean leakage (prior MSE - attack MSE) within {feature_margin:g} of the prior's MSE"
                    if secret == "features" else f"mean leakage (attack - prior accuracy) within {margin:g}")
            tables.append(Table(f"{secret}: the weakest strength at which each attack falls to the adversary's prior",
                                [*keys, "falls to the prior at"], rows, set(), note=f"Falls to the prior: {rule}."))
    return tables
