"""The canary audit's part of a report, from records only: what the canaries cost in utility, each attack's and each
defense strength's empirical epsilon (a 95% lower bound), and the check of every claimed epsilon against it.

The empirical epsilon is a lower bound: a weak attack certifies little, so the worst case over the attacks is the
number to report; an accountant's epsilon is an upper bound, so a claim is consistent while the empirical bound stays
below it, and violated (the defense's implementation or its accountant is wrong) when it exceeds it.
"""

from __future__ import annotations

import math

import pandas as pd

from vflpriv.reports.tables import mean_std
from vflpriv.tradeoff.auditing import auditor_table
from vflpriv.tradeoff.cap import strength_label
from vflpriv.tradeoff.epsilon import epsilon_table


def _num(value) -> float | None:
    return None if value is None or (isinstance(value, float) and not math.isfinite(value)) else float(value)


def _utility(rows: pd.DataFrame) -> dict:
    """Mean and std over the trainings (one value per training)."""
    values = rows[rows["status"] == "ok"].drop_duplicates("training_key")["utility"]
    return {"mean": _num(values.mean()), "std": _num(values.std(ddof=0)), "trainings": int(len(values))}


def canary_summary(frame: pd.DataFrame) -> dict | None:
    """The canary part of an audit's summary (None when no run had canaries): ``frame`` holds every run, those with
    canaries and, for the cost, the undefended finetuning without them."""
    planted = int(frame["canaries"].max()) if len(frame) else 0
    if planted == 0:
        return None
    undefended = frame[(frame["defense"] == "none") & (frame["phase"] == "finetune")]
    with_canaries, without = undefended[undefended["canaries"] > 0], undefended[undefended["canaries"] == 0]
    rows = [{k: (_num(v) if isinstance(v, float) else v) for k, v in row.items()}
            for row in epsilon_table(frame[frame["canaries"] > 0]).to_dict("records")]
    for row in rows:
        row["line"] = _line(row)
    audited = [{k: (_num(v) if isinstance(v, float) else v) for k, v in row.items()}
               for row in auditor_table(frame[frame["canaries"] > 0]).to_dict("records")]
    for row in audited:
        row["line"] = _auditor_line(row)
    return {"canaries": planted, "utility_with": _utility(with_canaries), "utility_without": _utility(without),
            "rows": rows, "violations": [r for r in rows if r.get("violated")], "auditor": audited}


def _auditor_line(row: dict) -> str:
    """An auditor's pooled bound against the claim, said as the auditor's (white box), never as an attack's."""
    where = f"{row['defense']} {strength_label(row.get('axis', 'strength'), row['strength'])}"
    text = (f"{where}, {row['phase']}, auditor {row['auditor']} (white box, not an attack): empirical epsilon >= "
            f"{row['epsilon_lower']:.2f} (95%, at delta {row['delta']:g}) from {row['canaries']} canaries over "
            f"{row['seeds']} seed{'s' if row['seeds'] != 1 else ''} ({row['canary_guesses']} guessed, accuracy "
            f"{row['canary_accuracy']:.3f})")
    claimed = row.get("epsilon_claimed")
    if claimed is not None:
        relation = "exceeds" if row["epsilon_lower"] > claimed else "is below"
        text += f"; claimed epsilon {claimed:.2f}: the bound {relation} it"
    return text


def _line(row: dict) -> str:
    where = "no defense" if row["defense"] == "none" else (
        f"{row['defense']} {strength_label(row.get('axis', 'strength'), row['strength'])}")
    who = (f"worst case over the attacks ({row.get('strongest')})" if row["attack"] == "worst-case" else row["attack"])
    bound = row["epsilon_lower"]
    text = f"{where}, {row['phase']}, {who}: empirical epsilon >= {bound:.2f} (95%)" if bound is not None else (
        f"{where}, {row['phase']}, {who}: no canary guessed")
    claimed = row.get("epsilon_claimed")
    if claimed is not None and bound is not None:
        text += (f"; claimed epsilon {claimed:.2f}: VIOLATED: the empirical lower bound exceeds the claim, so the "
                 f"defense's implementation or its accountant is wrong here" if row.get("violated")
                 else f"; claimed epsilon {claimed:.2f}: consistent")
    return text


def canary_markdown(summary: dict | None) -> list[str]:
    """The lines of the report's canary section (none without canaries)."""
    if summary is None:
        return []
    w, wo = summary["utility_with"], summary["utility_without"]

    def utility(u: dict) -> str:
        return "n/a" if u["mean"] is None else f"{mean_std(u['mean'], u['std'], n=u['trainings'])} over " \
            f"{u['trainings']} training{'s' if u['trainings'] != 1 else ''}"

    lines = ["", "## Empirical epsilon (random-label canaries)", "",
             f"{summary['canaries']} labeled training samples train with a label drawn uniformly from the classes; each "
             "attack guesses them (its most confident ones where it says how sure it is, the choice Bonferroni-"
             "corrected), and the right guesses give a one-sided 95% lower bound on the training's label-DP epsilon "
             "(Steinke, Nasr & Jagielski 2023, for labels; pooled over the seeds). It is a lower bound: the worst case "
             "over the attacks is the one to report; an accountant's epsilon is an upper bound, and a claim below the "
             "empirical bound is wrong.", "",
             f"What the canaries cost (no defense): utility {utility(w)} with them, {utility(wo)} without.", ""]
    if summary["violations"]:
        lines += ["**A claimed epsilon is violated:**", ""] + [f"- **{r['line']}**" for r in summary["violations"]] + [""]
    lines += [f"- {r['line']}" for r in summary["rows"]]
    if summary.get("auditor"):
        lines += ["", "### The auditor's empirical epsilon (white box, not an attack)", "",
                  "An auditor holds what no party holds (every other label, the initial state, the active party's "
                  "noisy update and rows at every step: Nasr et al. 2021's intermediate-model adversary) and tests the "
                  "DP defense's claim with a likelihood-ratio test; its bound enters no leakage, CAP, verdict or worst "
                  "case over the attacks above.", ""] + [f"- {r['line']}" for r in summary["auditor"]]
    return lines


def epsilon_tables(results: pd.DataFrame) -> list:
    """Per (method, dataset, defense, phase) with canaries: rows = the attacks and their worst case, columns = the
    defense's strengths, cells the pooled empirical epsilon (95% lower bound), with the claimed epsilon where the
    defense has an accountant; a violated claim is bold."""
    from vflpriv.reports.paper_tables import Table

    table = epsilon_table(results[results["canaries"] > 0]) if "canaries" in results else pd.DataFrame()
    out = []
    for (method, dataset, defense, phase), rows in (table.groupby(["method", "dataset", "defense", "phase"], sort=False)
                                                    if len(table) else []):
        axis = str(rows["axis"].iloc[0])
        strengths = sorted(dict.fromkeys(rows["strength"]), reverse=rows["stronger"].iloc[0] == "lower")  # weak first
        columns = ["attack", *(strength_label(axis, s) if defense != "none" else "no defense" for s in strengths)]
        cells, best = [], set()
        for r, attack in enumerate(dict.fromkeys(rows["attack"])):
            row = [attack]
            for j, s in enumerate(strengths, 1):
                hit = rows[(rows["attack"] == attack) & (rows["strength"] == s)]
                value = hit["epsilon_lower"].iloc[0] if len(hit) else float("nan")
                row.append("n/a" if not math.isfinite(value) else f"≥ {value:.2f}")
                if len(hit) and bool(hit["violated"].iloc[0]):
                    best.add((r, j))
            cells.append(row)
        claimed = [rows.loc[rows["strength"] == s, "epsilon_claimed"].iloc[0] for s in strengths]
        if any(math.isfinite(c) for c in claimed):
            cells.append(["claimed ε", *(f"{c:.2f}" if math.isfinite(c) else "n/a" for c in claimed)])
        out.append(Table(f"Empirical ε (95% lower bound from {int(results['canaries'].max())} canaries, pooled over "
                         f"seeds): {method} on {dataset}, {defense} ({phase})", columns, cells, best,
                         note="bold: the empirical lower bound exceeds the claimed ε (the claim is wrong); the worst "
                              "case takes each attack's bound at 5%/A (Bonferroni over the A attacks)."))
    return out + _cost_tables(results)


def _cost_tables(results: pd.DataFrame) -> list:
    """Per (method, dataset) whose undefended finetuning ran with and without canaries: the utility of each."""
    from vflpriv.reports.paper_tables import Table

    runs = results[(results["defense"] == "none") & (results["phase"] == "finetune")] if "canaries" in results else []
    out = []
    for (method, dataset), rows in (runs.groupby(["method", "dataset"], sort=False) if len(runs) else []):
        planted, without = rows[rows["canaries"] > 0], rows[rows["canaries"] == 0]
        if planted.empty or without.empty:
            continue
        cells = []
        for label, part in ((f"with {int(planted['canaries'].max())} canaries", planted), ("without", without)):
            u = _utility(part)
            cells.append([label, mean_std(u["mean"], u["std"], n=u["trainings"]),
                          str(u["trainings"])])
        out.append(Table(f"What the canaries cost: {method} on {dataset}, no defense", ["training", "utility", "trainings"],
                         cells, set(), note="utility on the test set, mean ± std over the trainings"))
    return out
