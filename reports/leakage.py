"""What leaked, from records: per setting and strength the attack's and the prior's accuracy, the leakage (attack -
prior) with its 95% interval and the verdict of the audit's test (``tradeoff.leakage``); and, from the undefended
records, each attack's verdict, the worst case being the attack with the largest leakage.

Below the prior reads two ways: without a defense the attack failed (it did not reach what the adversary knows alone,
so it says nothing about leakage); with one, the defense pushed the attack below the prior (unless the attack failed
without the defense too). Rows come in one stable order: setting, attack, no defense first and then the defenses by
name, strengths weak to strong.
"""

from __future__ import annotations

import math

import pandas as pd

from vflpriv.common.secret_kinds import FEATURES, LABELS, SECRETS
from vflpriv.reports.canaries import without_prior
from vflpriv.reports.features import NOTE as FEATURE_NOTE
from vflpriv.reports.features import judged
from vflpriv.reports.paper_tables import Table, natural
from vflpriv.reports.tables import falls_text, roles, who
from vflpriv.tradeoff.cap import strength_label
from vflpriv.tradeoff.scores import narrowed
from vflpriv.tradeoff.worst_case import WORST
from vflpriv.tradeoff.configurations import digest
from vflpriv.tradeoff.leakage import (FEATURE_MARGIN, MARGIN, TEST_COLUMNS, falls_to_prior, leakage_test, measured,
                                      strength_verdicts, verdict_rule)
from vflpriv.tradeoff.variants import with_variants

CELL = ["method", "dataset", "attack", "defense", "phase"]
#: Undefended verdicts with nothing for a defense to bring down, and what a defense's "falls to the prior" says instead.
UNDEFENDED_AT_PRIOR = {"attack failed": "n/a: below the prior without a defense (attack failed)",
                       "no": "n/a: no leakage beyond the prior without a defense",
                       "n/a": "n/a: the attack does not apply (see Not applicable)"}
#: What the label attacks never read of a configuration (what a feature attack knows; its roles are ROLES).
UNREAD_BY_LABELS = frozenset({"partition.aux_features"})
#: A defended attack below the prior: the defense pushed it there, or it failed without the defense too.
PUSHED, BELOW_AS_UNDEFENDED = "below the prior", "below the prior (failed undefended too)"


def _num(value: float, fmt: str = "{:.3f}") -> str:
    return "n/a" if value is None or not math.isfinite(value) else fmt.format(value)


def leakage_rows(results: pd.DataFrame, *, margin: float = MARGIN) -> pd.DataFrame:
    """One row per (method, dataset, attack, defense, phase, variant, strength) whose successful records have a prior:
    the means (utility too), the leakage, its interval and p, the verdict (``reading`` says it in words) and the test's
    name, in :func:`row_order`. Variants are named among these records (``tradeoff.variants``), so a run that measures
    no leakage (the audit's canary-free controls) neither enters a test nor renames the others; each seed counts once
    in a row."""
    ok = measured(results) if len(results) else results
    ok = ok[ok["attack"] != WORST] if len(ok) else ok
    if ok.empty:
        return pd.DataFrame()
    ok = with_variants(ok.drop(columns=["variant"], errors="ignore"))
    who_keys = ["secret", *roles(ok)] if roles(ok) else []  # a feature attack by two adversaries: two rows
    ok = narrowed(ok, [*CELL, *who_keys, "variant", "strength", "strength_stronger", "strength_axis", "utility",
                       *TEST_COLUMNS])
    rows = []
    for keys, group in ok.groupby([*CELL, *who_keys, "variant", "strength"], sort=False):
        test = leakage_test(group, margin=margin)
        stronger = str(group["strength_stronger"].iloc[0]) if "strength_stronger" in group else "higher"
        rows.append({**dict(zip([*CELL, *who_keys, "variant", "strength"], keys)), "axis": str(group["strength_axis"].iloc[0])
                     if "strength_axis" in group else "lambda", "stronger": stronger,
                     "utility": float(group["utility"].mean()), "attack_accuracy": test.attack_mean,
                     "prior_accuracy": test.prior_mean, "leakage": test.leakage, "ci_low": test.ci_low,
                     "ci_high": test.ci_high, "p_value": test.p_value, "verdict": test.verdict,
                     "seeds": test.n_seeds, "test": test.test})
    frame = pd.DataFrame(rows)
    frame["verdict"] = [_below_prior(r, frame) for r in frame.to_dict("records")]
    frame["reading"] = frame["verdict"].map(READING)
    return frame.iloc[sorted(range(len(frame)), key=lambda i: row_order(frame.iloc[i]))].reset_index(drop=True)


#: What each verdict says, in words (the report's "leaks?" column).
READING = {"yes": "yes: leaks beyond the prior", "no": "no: within the margin of the prior",
           "inconclusive": "inconclusive", "attack failed": "attack failed: below the prior without a defense",
           PUSHED: "no: the defense pushed the attack below the prior",
           BELOW_AS_UNDEFENDED: "below the prior, as without the defense (the attack failed)"}


def _below_prior(row: dict, frame: pd.DataFrame) -> str:
    """A defended row below the prior: the defense pushed the attack there, unless the same attack failed without a
    defense on the same setting (then the defense is not why)."""
    if row["verdict"] != "attack failed" or row["defense"] == "none":
        return row["verdict"]
    same = frame[(frame["defense"] == "none") & (frame["method"] == row["method"]) & (frame["dataset"] == row["dataset"])
                 & (frame["attack"] == row["attack"]) & (frame["phase"] == row["phase"])]
    for key in ("adversary", "victim"):
        if key in frame:
            same = same[same[key] == row[key]]
    return BELOW_AS_UNDEFENDED if (same["verdict"] == "attack failed").any() else PUSHED


def row_order(row) -> list:
    """Setting, attack, no defense first then the defenses by name, variants, strengths weak to strong (epsilon: the
    highest first)."""
    strength = float(row["strength"])
    return [natural(str(row["method"])), natural(str(row["dataset"])), str(row["phase"]), str(row["attack"]),
            row["defense"] != "none", str(row["defense"]), natural(str(row["variant"])),
            -strength if row.get("stronger", "higher") == "lower" else strength]


def _setting(r: dict) -> str:
    return f"{r['method']} / {r['dataset']} ({r['phase']})" + (f", {r['variant']}" if r.get("variant") else "")


def attack_tables(rows: pd.DataFrame) -> dict[str, Table]:
    """Per attack (by name), its leakage under every defense and strength: utility, attack and prior accuracy, the
    leakage and its interval, what it reads as (the rule: :func:`~vflpriv.tradeoff.leakage.verdict_rule`), the
    seeds."""
    tables: dict[str, Table] = {}
    if rows.empty:
        return tables
    several = rows[["method", "dataset", "phase", "variant"]].drop_duplicates().shape[0] > 1
    for attack in sorted(set(rows["attack"])):
        part = rows[rows["attack"] == attack].to_dict("records")
        cells = [[*([_setting(r)] if several else []), "no defense" if r["defense"] == "none" else r["defense"],
                  "" if r["defense"] == "none" else strength_label(r["axis"], r["strength"]), _num(r["utility"]),
                  _num(r["attack_accuracy"]), _num(r["prior_accuracy"]), _num(r["leakage"], "{:+.3f}"),
                  f"[{_num(r['ci_low'], '{:+.3f}')}, {_num(r['ci_high'], '{:+.3f}')}]", r["reading"], str(r["seeds"])]
                 for r in part]
        setting = "" if several else f": {_setting(part[0])}"
        tables[attack] = Table(
            f"{attack}{setting}: leakage beyond the adversary's prior (attack − prior accuracy on the same targets)",
            [*(["setting"] if several else []), "defense", "strength", "utility", "attack", "prior", "leakage",
             "95% CI", "leaks?", "seeds"], cells, set())
    return tables


def leakage_tables(rows: pd.DataFrame, *, margin: float = MARGIN) -> list[Table]:
    """Every row in tables (``vflpriv table``'s Markdown), in :func:`row_order`: the label attacks' accuracies, then
    the feature attacks' MSEs in a table of their own, each row naming its adversary and victim."""
    if rows.empty:
        return []
    features = rows["secret"] == FEATURES if "secret" in rows else pd.Series(False, index=rows.index)
    return [_leakage_table(part, margin=margin, features=secret) for secret, part in
            ((False, rows[~features]), (True, rows[features])) if len(part)]


def _leakage_table(rows: pd.DataFrame, *, margin: float, features: bool) -> Table:
    number, signed = ("{:.4f}", "{:+.4f}") if features else ("{:.3f}", "{:+.3f}")
    cells = [[" / ".join(str(r[c]) for c in CELL) + (f" ({r['variant']})" if r["variant"] else "")
              + (f": {who(str(r['adversary']))} on party {r['victim']}" if features else ""),
              "undefended" if r["defense"] == "none" else strength_label(r["axis"], r["strength"]),
              _num(r["utility"]), _num(r["attack_accuracy"], number), _num(r["prior_accuracy"], number),
              _num(r["leakage"], signed), f"[{_num(r['ci_low'], signed)}, {_num(r['ci_high'], signed)}]",
              r["reading"], str(r["seeds"])]
             for r in rows.to_dict("records")]
    what = ("prior MSE - attack MSE on the same targets, features scaled to [0, 1]" if features
            else "attack accuracy - prior accuracy on the same targets")
    return Table(f"{'Feature leakage' if features else 'Leakage'} beyond the adversary's prior ({what})",
                 [f"method / dataset / attack / defense / phase{': adversary on victim' if features else ''}",
                  "strength", "utility", "attack MSE" if features else "attack", "prior MSE" if features else "prior",
                  "leakage", "95% CI", "leaks?", "seeds"], cells, set(),
                 note=FEATURE_NOTE.format(margin=FEATURE_MARGIN) if features else f"Verdicts: {verdict_rule(margin)}.")


def verdicts(rows: pd.DataFrame) -> list[dict]:
    """Per setting (method, dataset, phase, variant), each attack's undefended verdict by attack name, and the worst
    case: the attack with the largest leakage among those that did not fail (chosen on the targets' labels: the
    auditor's worst case)."""
    if rows.empty:
        return []
    plain = rows[rows["defense"] == "none"]
    found = []
    for _, part in plain.groupby(["method", "dataset", "phase", "variant"], sort=False):
        trained = part[(part["verdict"] != "attack failed") & part["leakage"].notna()]
        worst = trained.loc[trained["leakage"].idxmax()] if len(trained) else None
        for r in sorted(part.to_dict("records"), key=lambda r: r["attack"]):
            found.append({"setting": _setting(r), "attack": r["attack"], "verdict": r["verdict"],
                          "leakage": r["leakage"], "ci": (r["ci_low"], r["ci_high"]),
                          "worst": worst is not None and r["attack"] == worst["attack"]})
    return found


def prior_strength_tables(results: pd.DataFrame, *, margin: float = MARGIN,
                          feature_margin: float = FEATURE_MARGIN) -> list[Table]:
    """Per secret, the weakest strength of each swept defense at which each attack falls to the adversary's prior
    (``tradeoff.leakage.falls_to_prior``: the strength's own paired test shows the leakage below the margin, for
    features a share of the prior's MSE, and no stronger one reads "yes"; else each strength's verdict), with the
    leakage and utility there; "n/a" where the attack did not leak without the defense in the configurations the
    defense ran (nothing to bring down: review fin F1), as the audit's and the report's own defense tables say, and
    that every defended run failed where none succeeded (review last3 F1: the attack had no row); one table per
    secret present."""
    tried = results[results["status"].isin(["ok", "failed"]) & (results["defense"] != "none")
                    & (results["attack"] != WORST)]  # an attack whose every defended run failed keeps its row
    if not (tried["status"] == "ok").any():
        return []
    secrets = tried["secret"] if "secret" in tried else pd.Series(LABELS, index=tried.index)
    tables = []
    for secret in SECRETS:
        part = tried[secrets == secret]
        keys = [*CELL, *(roles(part) if secret == FEATURES else []),  # a feature attack: per adversary and victim
                *(["variant"] if "variant" in part and (part["variant"] != "").any() else [])]  # configurations apart
        if part.empty:
            continue
        rows = (_feature_rows(results, keys, feature_margin) if secret == FEATURES
                else _label_rows(results, part, keys, margin))
        rule = ("the strength's own paired test shows the leakage " + (
            f"(prior MSE - attack MSE) below {feature_margin:g} of the prior's MSE" if secret == FEATURES
            else f"(attack - prior accuracy) below {margin:g}") + " (its verdict 'no') and no stronger strength leaks")
        tables.append(Table(f"{secret}: the weakest strength at which each attack falls to the adversary's prior",
                            [*keys, "falls to the prior at"], rows, set(), note=f"Falls to the prior: {rule}."))
    return tables


def _feature_rows(results: pd.DataFrame, keys: list[str], margin: float) -> list[list[str]]:
    """The feature attacks' rows, as the report's feature defense table judges them (``reports.features.judged``)."""
    frame = results[results["secret"] == FEATURES]
    _, defenses = judged(frame, margin=margin)
    rows = []
    for d in defenses:
        if d["attack"] == WORST:
            continue
        values = {"method": d["place"][0], "dataset": d["place"][1], **d}
        rows.append([str(values.get(k, "")) for k in keys] + [d["falls_to_prior_text"]])
    return rows


def _label_rows(results: pd.DataFrame, part: pd.DataFrame, keys: list[str], margin: float) -> list[list[str]]:
    """The label attacks' rows: the weakest strength, or what the undefended verdict of every configuration the
    defense ran (``tradeoff.configurations.digest``) says where none leaked."""
    plain = results[(results["defense"] == "none") & (results["attack"] != WORST)]
    plain = plain[plain["secret"] == LABELS] if "secret" in plain else plain
    plain = plain[~without_prior(plain)] if "config" in plain else plain  # the canaries' controls measure utility
    undefended: dict[tuple, set[str]] = {}  # per cell and configuration digest, the verdicts of its undefended runs
    cell = ["method", "dataset", "attack", "phase"]
    for values, rows in _configured(plain).groupby([*cell, *(["variant"] if "variant" in plain else [])],
                                                     sort=False):  # runs a digest pools are apart in their variants
        verdict = leakage_test(rows, margin=margin).verdict
        for c in rows["_config"].unique():
            undefended.setdefault((*values[:len(cell)], c), set()).add(verdict)
    rows = []
    for values, group in _configured(part).groupby(keys, sort=False):
        first = group.iloc[0]
        found = [undefended.get((*(first[c] for c in cell), c)) for c in group["_config"].unique()]
        verdicts = set().union(*(v for v in found if v))
        quiet = None not in found and verdicts <= set(UNDEFENDED_AT_PRIOR)
        falls = None if quiet else falls_to_prior(group, margin=margin)
        axis = str(group["strength_axis"].iloc[0]) if "strength_axis" in group else "lambda"
        where = (UNDEFENDED_AT_PRIOR[verdicts.pop() if len(verdicts) == 1 else "no"] if quiet else
                 falls_text(falls, axis, strength_verdicts(group, margin=margin), compared=None not in found))
        rows.append([*(str(v) for v in values), where])
    return rows


def _configured(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each run's configuration digest (``_config``; '' where the records hold none)."""
    configs = (frame["config"].map(lambda c: digest(c, unread=UNREAD_BY_LABELS)) if "config" in frame
               else pd.Series("", index=frame.index, dtype=object))
    return frame.assign(_config=configs)
