"""The canary audit's part of a report, from records only: what the canaries cost in utility, each attack's and each
defense strength's empirical epsilon (a 95% lower bound), and the check of every claimed epsilon against it.

The empirical epsilon is a lower bound: a weak attack certifies little, so the worst case over the planned attacks is
the number to report, beside its cap (what the canaries could certify if every guess were right). An accountant's
epsilon is an upper bound: a claim at or above the cap is untestable with those canaries; below it, the claim is
rejected at the 95% level only from the worst case, with Holm's correction over every claim the report checks, the
attacks' and the auditor's together (``vflpriv.tradeoff.epsilon.holm_over``: one family, so the chance of rejecting
any true claim of the report is at most 5%), and never from one attack's row.
"""

from __future__ import annotations

import json
import math

import pandas as pd

from vflpriv.common.canary_bound import CAP_MARGIN, Untestable, canaries_needed, chosen_test
from vflpriv.common.empirical_epsilon import claim_text
from vflpriv.reports.tables import EPSILON_NOTE, mean_std
from vflpriv.tradeoff.auditing import auditor_table
from vflpriv.tradeoff.cap import strength_label
from vflpriv.tradeoff.epsilon import WORST, epsilon_table, holm_over


def _num(value) -> float | None:
    return None if value is None or (isinstance(value, float) and not math.isfinite(value)) else float(value)


def _utility(rows: pd.DataFrame) -> dict:
    """Mean and std over the trainings (one value per training)."""
    values = rows[rows["status"] == "ok"].drop_duplicates("training_key")["utility"]
    return {"mean": _num(values.mean()), "std": _num(values.std(ddof=0)), "trainings": int(len(values))}


def without_prior(frame: pd.DataFrame) -> pd.Series:
    """Whether each run's attack had no prior (``attack.prior: none``): such a run measures no leakage, as the audit's
    canary-free control trainings, there for the utility the canaries cost."""
    return pd.Series([_prior(c) == "none" for c in frame["config"]], index=frame.index, dtype=bool)


def _prior(config) -> str | None:
    """A record's ``attack.prior``; None where its config is not a mapping with an ``attack`` mapping (an edited
    record, read as having a prior: review fin2 G4)."""
    try:
        found = json.loads(config) if isinstance(config, str) and config else {}
    except ValueError:
        return None
    attack = found.get("attack") if isinstance(found, dict) else None
    return attack.get("prior") if isinstance(attack, dict) else None


def canary_controls(frame: pd.DataFrame) -> pd.Series:
    """Whether each run is a canary-free control (the audit's): undefended, without canaries and without a prior, in
    records where other runs have canaries. It measures what the canaries cost in utility, no attack."""
    if frame.empty or "canaries" not in frame or not (frame["canaries"] > 0).any():
        return pd.Series(False, index=frame.index, dtype=bool)
    return (frame["defense"] == "none") & (frame["canaries"] == 0) & without_prior(frame)


def _cost_split(undefended: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The undefended honest trainings with canaries and those without (each counted once, :func:`_utility`), whatever
    the attacked phase (a training is the same for a pretraining and a finetuning attack); a federation trained under
    an acting attack (``mc-active``'s own) has another utility and is left out."""
    if "training_under_attack" in undefended:
        undefended = undefended[~undefended["training_under_attack"].astype(bool)]
    return undefended[undefended["canaries"] > 0], undefended[undefended["canaries"] == 0]


def canary_summary(frame: pd.DataFrame) -> dict | None:
    """The canary part of an audit's summary (None when no run had canaries): ``frame`` holds every run, those with
    canaries and, for the cost, the undefended trainings without them."""
    planted = int(frame["canaries"].max()) if len(frame) else 0
    if planted == 0:
        return None
    with_canaries, without = _cost_split(frame[frame["defense"] == "none"])
    planted_runs = frame[frame["canaries"] > 0]
    attacks, auditor = holm_over(epsilon_table(planted_runs), auditor_table(planted_runs))  # one family, one 5%
    rows = [{k: (_num(v) if isinstance(v, float) else v) for k, v in row.items()} for row in attacks.to_dict("records")]
    for row in rows:
        row["line"] = _line(row)
    audited = [{k: (_num(v) if isinstance(v, float) else v) for k, v in row.items()}
               for row in auditor.to_dict("records")]
    for row in audited:
        row["line"] = _auditor_line(row)
    return {"canaries": planted, "utility_with": _utility(with_canaries), "utility_without": _utility(without),
            "rows": rows, "rejected": [r for r in rows if r.get("rejected")], "auditor": audited}


def empirical_text(bound: float, delta: float) -> str:
    """``empirical epsilon >= 3.20 (95%, pure)``, or ``(95%, at delta 1e-05)``."""
    return f"empirical epsilon >= {bound:.2f} (95%, " + (f"at delta {delta:.3g})" if delta else "pure)")


def _auditor_line(row: dict) -> str:
    """An auditor's pooled bound against the claim, said as the auditor's (white box), never as an attack's, and worded
    by what its canaries can show (its cap, untestable at or above it, Holm over the report's claims, the attacks'
    with them)."""
    where = f"{row['defense']} {strength_label(row.get('axis', 'strength'), row['strength'])}"
    options = f"{row['auditor_options']}; " if row.get("auditor_options") else ""
    fdp_tests = row["delta"] > 0 and _num(row.get("mu_lower")) is not None  # the claim's test: canary_bound's choice
    text = (f"{where}, {row['phase']}, auditor {row['auditor']} ({options}white box, not an attack): "
            f"{'Steinke et al. ' if fdp_tests else ''}{empirical_text(row['epsilon_lower'], row['delta'])} from "
            f"{int(row['canaries'])} canaries over "
            f"{row['seeds']} seed{'s' if row['seeds'] != 1 else ''} (the menu entry selected for it: its "
            f"{int(row['canary_guesses'])} most confident guesses, accuracy {row['canary_accuracy']:.3f})")
    if _num(row.get("mu_lower")) is not None:  # the f-DP bounds (NaN in rows read from records without them)
        test = ", the claim's test at this delta" if fdp_tests else ""
        text += (f"; f-DP one run: epsilon >= {row['epsilon_fdp']:.2f} at delta {row['delta']:.3g} (95%{test}), not "
                 f"mu-GDP for mu < {row['mu_lower']:.3f} (95%), epsilon {row['epsilon_gdp_estimate']:.2f} estimated "
                 "from that mu if the mechanism's curve is Gaussian (an estimate, not a bound)")
    claimed = row.get("epsilon_claimed")
    if claimed is None:
        return text
    text += f"; claimed {claim_text(claimed, row['delta'])}: "
    if not row.get("testable"):
        cap, count = row["cap"], int(row["canaries"])
        return text + f"untestable with {count} canaries (not below their cap {cap:.2f} by {CAP_MARGIN:g})"
    family = int(row.get("holm_family") or 1)
    holm = f"Holm over the report's {family} claim test{'s' if family != 1 else ''}, the attacks' and the auditor's"
    if row.get("rejected"):
        by = f" ({row['rejecting_test']}'s test)" if isinstance(row.get("rejecting_test"), str) else ""
        return text + (f"claim rejected at the 95% level ({holm}): {int(row['rejecting_right'])} of "
                       f"{int(row['rejecting_guesses'])} guesses right{by}, adjusted p = {row['p_value']:.2g}, cap "
                       f"{row['cap']:.2f}")
    return text + f"not rejected (adjusted p = {row['p_value']:.2g}, {holm}; cap {row['cap']:.2f})"


def _line(row: dict) -> str:
    where = "no defense" if row["defense"] == "none" else (
        f"{row['defense']} {strength_label(row.get('axis', 'strength'), row['strength'])}")
    where += f" [{row['variant']}]" if row.get("variant") else ""
    bound, delta = row["epsilon_lower"], row.get("epsilon_lower_delta") or 0.0
    if row["attack"] != WORST:
        if bound is None:
            return f"{where}, {row['phase']}, {row['attack']}: no canary guessed"
        fdp = _num(row.get("epsilon_fdp"))  # NaN in rows of tables written before it
        return (f"{where}, {row['phase']}, {row['attack']} alone (at 5%): {empirical_text(bound, delta)} from "
                f"{int(row['canaries'])} canaries" + ("" if fdp is None else f" (f-DP one run: >= {fdp:.2f}; each "
                                                      f"bound at 5% alone, {chosen_test(delta)}'s is the test)") +
                f"; the entry selected for it: {int(row['canary_guesses'])} guesses, "
                f"{row['canary_accuracy_selected']:.2f} right (every guess: {row['canary_accuracy_all']:.2f})")
    planned = int(row["planned_attacks"])
    test = f", {row['bound_test']}'s bound" if row.get("bound_test") else ""
    text = (f"{where}, {row['phase']}, worst case over the {planned} planned attack{'s' if planned != 1 else ''} "
            f"({row['strongest']}{test}; each attack at 5%/{planned}): {empirical_text(bound, delta)}; cap "
            f"{row['cap']:.2f} with {int(row['canaries'])} canaries (every guess right)")
    return text + "; " + _claim(row)


def _claim(row: dict) -> str:
    """The check of the setting's claim, worded by what its canaries can show."""
    claimed = row.get("epsilon_claimed")
    if claimed is None:
        return f"no claimed epsilon ({row['claim_note']})" if row.get("claim_note") else "no claimed epsilon"
    text = f"claimed {claim_text(claimed, row.get('epsilon_claimed_delta') or 0.0)}: "
    if not row.get("testable"):
        try:
            needed = canaries_needed(claimed, classes=int(row["classes"]), attacks=int(row["planned_attacks"]),
                                     delta=row.get("epsilon_claimed_delta") or 0.0, seeds=int(row["seeds"]))
            needs = f"a claim of {claimed:.2f} needs {needed} canaries pooled over the seeds"
        except Untestable as peak:  # no count up to MAX_CANARIES reaches the claim
            needs = str(peak)
        return text + (f"untestable with {int(row['canaries'])} canaries (not below their cap by {CAP_MARGIN:g}: "
                       f"{row.get('cap_at_claim') or row['cap']:.2f}; {needs})")
    family = int(row.get("holm_family") or 1)
    holm = f"Holm over the report's {family} claim test{'s' if family != 1 else ''}"
    if row.get("rejected"):
        by = f", {row['rejecting_test']}'s test" if row.get("rejecting_test") else ""
        return text + (f"claim rejected at the 95% level ({holm}): {row['rejecting_attack']} guessed "
                       f"{int(row['rejecting_right'])} of {int(row['rejecting_guesses'])} canaries right "
                       f"({int(row['canaries'])} "
                       f"pooled{by}; adjusted p = {row['p_value']:.2g})")
    return text + f"not rejected (adjusted p = {row['p_value']:.2g}, {holm}; cap {row.get('cap_at_claim'):.2f})"


def canary_markdown(summary: dict | None) -> list[str]:
    """The lines of the report's canary section (none without canaries)."""
    if summary is None:
        return []
    w, wo = summary["utility_with"], summary["utility_without"]

    def utility(u: dict) -> str:
        return "n/a" if u["mean"] is None else f"{mean_std(u['mean'], u['std'], n=u['trainings'])} over " \
            f"{u['trainings']} training{'s' if u['trainings'] != 1 else ''}"

    lines = ["", "## Empirical epsilon (random-label canaries)", "",
             f"{summary['canaries']} labeled training samples train with a label drawn uniformly from the classes "
             "(from a key the adversary does not hold); each attack guesses them (its most confident ones where it says how "
             "sure it is, from a fixed menu, Bonferroni-corrected), and the right guesses give a one-sided 95% lower "
             "bound on the training's label-DP epsilon (Steinke, Nasr & Jagielski 2023, for labels; pooled over the "
             "seeds), and the f-DP one-run bound beside it (Mahloujifar, Melis & Chaudhuri 2024). The worst case over "
             "the planned attacks (each at 5%/A, with one test chosen by delta before any data: Steinke et al.'s for a "
             "pure claim, where the f-DP one never rejects more, the f-DP one at delta > 0) is the one to report; "
             "its cap is the most the canaries could certify with every guess right, so a claimed epsilon at or above "
             "it (or within 1e-4 below it) is untestable with them. A claim is rejected at the 95% level only from the "
             "worst case (adjusted p: "
             "its p-value, Bonferroni over the attacks and the menu, at most 1), with "
             "Holm's correction over every claim this report checks, the attacks' and the auditor's together, so the "
             "chance of rejecting any true claim here is at most 5%.", "",
             f"What the canaries cost (no defense): utility {utility(w)} with them, {utility(wo)} without.", ""]
    if summary["rejected"]:
        rejected = [f"- **{r['line']}**" for r in summary["rejected"]]
        lines += ["**Claims rejected at the 95% level:**", "", *rejected, ""]
    lines += [f"- {r['line']}" for r in summary["rows"]]
    if summary.get("auditor"):
        lines += ["", "### The auditor's empirical epsilon (white box, not an attack)", "",
                  "An auditor holds what no party holds (every other label, the initial state, the active party's "
                  "noisy update and rows at every step: Nasr et al. 2021's intermediate-model adversary) and tests the "
                  "DP defense's claim with a likelihood-ratio test; its bound enters no leakage, CAP, verdict or worst "
                  "case over the attacks above.", ""] + [f"- {r['line']}" for r in summary["auditor"]]
    return lines


def epsilon_tables(results: pd.DataFrame, table: pd.DataFrame | None = None) -> list:
    """Per (method, dataset, defense, phase, variant) with canaries: rows = the attacks and their worst case, columns =
    the defense's strengths, cells the pooled empirical epsilon (95% lower bound), then the cap and the claimed
    epsilon with its check where the defense has an accountant; a rejected claim is bold. ``table``: the records'
    ``epsilon_table`` where the caller computed it already."""
    from vflpriv.reports.paper_tables import Table

    if table is None:
        table = epsilon_table(results[results["canaries"] > 0]) if "canaries" in results else pd.DataFrame()
    out = []
    for (method, dataset, defense, phase, variant), rows in (
            table.groupby(["method", "dataset", "defense", "phase", "variant"], sort=False) if len(table) else []):
        axis = str(rows["axis"].iloc[0])
        strengths = sorted(dict.fromkeys(rows["strength"]), reverse=rows["stronger"].iloc[0] == "lower")  # weak first
        columns = ["attack", *(strength_label(axis, s) if defense != "none" else "no defense" for s in strengths)]
        worst = rows[rows["attack"] == WORST].set_index("strength")
        cells, best = [], set()
        for attack in dict.fromkeys(rows["attack"]):
            row = [attack if attack != WORST else f"worst case (each at 5%/{int(worst['planned_attacks'].max())})"]
            for s in strengths:
                hit = rows[(rows["attack"] == attack) & (rows["strength"] == s)]
                row.append(_bound_cell(hit.iloc[0]) if len(hit) else "n/a")
            cells.append(row)
        cells.append(["cap (every guess right)", *(f"{worst.loc[s, 'cap']:.2f}" if s in worst.index else "n/a"
                                                   for s in strengths)])
        claims = [worst.loc[s] if s in worst.index else None for s in strengths]
        claimed = any(c is not None and math.isfinite(c["epsilon_claimed"]) for c in claims)
        if claimed:
            cells.append(["claimed ε", *(_claim_cell(c) for c in claims)])
            best |= {(len(cells) - 1, j) for j, c in enumerate(claims, 1) if c is not None and bool(c["rejected"])}
        delta = float(rows["epsilon_lower_delta"].max())
        out.append(Table(f"Empirical ε (95% lower bound, {'pure' if not delta else f'at δ {delta:.3g}'}, from "
                         f"{int(rows['canaries'].max())} canaries pooled over seeds): {method} on {dataset}, {defense} "
                         f"({phase}){f' [{variant}]' if variant else ''}", columns, cells, best,
                         note="an attack's cell: Steinke et al.'s bound at 5% alone (the f-DP one-run bound beside "
                              "it, at 5% alone: at δ > 0 their larger is not a 95% bound); the worst case: the test "
                              "chosen by δ (Steinke et al.'s at 0, f-DP above) per attack at its share, and its name. "
                              "bold: the claim is rejected at the 95% level (worst case over the planned attacks, Holm "
                              "over every claim of these tables); untestable: the claim is at or above the cap (or "
                              "within 1e-4 below it), so no outcome of these canaries could reject it."
                              + (f" Claimed ε: {EPSILON_NOTE}." if claimed else "")))
    return out + _cost_tables(results)


def _bound_cell(row) -> str:
    """``≥ 3.70`` and the f-DP bound beside it for an attack (``≥ 3.70 (f-DP 3.61)``), the test for the worst case."""
    value = row["epsilon_lower"]
    if not math.isfinite(value):
        return "n/a"
    fdp, test = _num(row.get("epsilon_fdp")), row.get("bound_test")
    note = f" (f-DP {fdp:.2f})" if row["attack"] != WORST and fdp is not None else (
        f" ({test})" if row["attack"] == WORST and isinstance(test, str) and test else "")
    return f"≥ {value:.2f}{note}"


def _claim_cell(row) -> str:
    if row is None or not math.isfinite(row["epsilon_claimed"]):
        return "n/a"
    delta = row["epsilon_claimed_delta"]
    text = f"{row['epsilon_claimed']:.2f}" + (f" at δ {delta:.3g}" if delta else " (pure)")
    if not row["testable"]:
        return text + f": untestable with {int(row['canaries'])} canaries"
    return text + (": rejected" if row["rejected"] else ": not rejected") + f" (adjusted p = {row['p_value']:.2g})"


def _cost_tables(results: pd.DataFrame) -> list:
    """Per (method, dataset) whose undefended finetuning ran with and without canaries: the utility of each."""
    from vflpriv.reports.paper_tables import Table

    runs = results[results["defense"] == "none"] if "canaries" in results else []
    out = []
    for (method, dataset), rows in (runs.groupby(["method", "dataset"], sort=False) if len(runs) else []):
        planted, without = _cost_split(rows)
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
