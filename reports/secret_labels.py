"""The report's section on the first secret, the active party's labels, in the order a reviewer reads it: the
verdicts without a defense (the worst case marked), then each attack (its leakage under every defense and strength,
weak to strong, and its privacy-utility figure: a line per defense), then each defense (its CAP against every attack,
the worst case last), then the empirical epsilon of the canaries. Attacks and defenses come by name, so two reports
of one store list them alike. Another secret (the parties' features) is another module of this form."""

from __future__ import annotations

import html
import math
from pathlib import Path

import pandas as pd

from vflpriv.reports.canaries import epsilon_tables
from vflpriv.reports.html import Section, anchor, image
from vflpriv.reports.leakage import attack_tables, verdicts
from vflpriv.reports.paper_tables import NON_FEDERATED, Table, natural, t_dcs_tables, tied_with_best
from vflpriv.reports.tables import cap_cell, utility_label
from vflpriv.tradeoff.worst_case import WORST
from vflpriv.tradeoff.leakage import MARGIN, verdict_rule


def labels_section(results: pd.DataFrame, rows: pd.DataFrame, caps: pd.DataFrame,
                   figures: dict[tuple[str, str], Path], *, margin: float = MARGIN) -> Section:
    """The labels' section from the records, their leakage rows (``reports.leakage.leakage_rows``), their CAP table
    (``tradeoff.cap.cap_table``) and the per-attack figures by (attack, phase)."""
    children = [Section("labels-verdicts", "Verdicts without a defense", _verdicts(rows, margin))]
    tables = attack_tables(rows)
    attacks = sorted(set(tables) | {a for a, _ in figures})
    if attacks:
        children.append(Section("labels-attacks", "By attack", "<p class='note'>Each attack under every defense, "
                                "strengths weak to strong; the figure draws a line per defense through its strengths, "
                                "the undefended training as a star, the adversary's prior dashed.</p>", [
            Section(anchor("labels-attack", a), a, (tables[a].html() if a in tables else "")
                    + "".join(image(path) for (name, _), path in sorted(figures.items()) if name == a))
            for a in attacks]))
    defended = caps[caps["defense"] != "none"] if len(caps) else caps
    if len(defended):
        children.append(Section("labels-defenses", "By defense", "".join(t.html() for t in t_dcs_tables(defended)), [
            Section(anchor("labels-defense", d), d, table.html()) for d, table in defense_tables(defended).items()]))
    epsilon = epsilon_tables(results)
    if epsilon:
        children.append(Section("labels-epsilon", "Empirical epsilon (random-label canaries)",
                                "".join(t.html() for t in epsilon)))
    return Section("labels", "Secret: the active party's labels", "", children)


def _verdicts(rows: pd.DataFrame, margin: float) -> str:
    if rows.empty:
        return ("<p class='note'>No leakage: these records hold no prior (attack.prior none), so no attack is "
                "compared with what the adversary knows without the federation.</p>")
    found = verdicts(rows)
    items = "".join(
        f"<li class='verdict'>{html.escape(v['setting'])}, {html.escape(v['attack'])}: leaks beyond the prior: "
        f"<strong>{html.escape(v['verdict'])}</strong> (leakage {v['leakage']:+.3f}, 95% CI "
        f"[{v['ci'][0]:+.3f}, {v['ci'][1]:+.3f}]){' (worst case: the largest leakage)' if v['worst'] else ''}</li>"
        for v in found)
    return (f"<ul>{items}</ul>" if items else "<p>No undefended run among these records.</p>") + (
        f"<p class='note'>Verdicts: {html.escape(verdict_rule(margin))}.</p>")


def defense_tables(caps: pd.DataFrame) -> dict[str, Table]:
    """Per defense (by name), its CAP against each attack (by name, the worst case last) for each method, a column per
    dataset naming its utility metric; bold where methods are compared: the best CAP of an attack's column and those
    tied with it within seed noise."""
    caps = caps.assign(variant=caps["variant"] if "variant" in caps else "")
    tables = {}
    for defense in sorted(set(caps["defense"])):
        part = caps[caps["defense"] == defense]
        datasets = sorted(set(part["dataset"]), key=natural)
        metrics = {d: ", ".join(sorted({m for m in part.loc[part["dataset"] == d, "utility_metric"] if m})) for d in
                   datasets}
        order = sorted(set(zip(part["attack"], part["phase"])), key=lambda k: (k[0] == WORST, k[0], k[1]))
        cells, best = [], set()
        for attack, phase in order:
            block = part[(part["attack"] == attack) & (part["phase"] == phase)]
            methods = sorted({(m, v) for m, v in zip(block["method"], block["variant"])}, key=lambda k: natural(
                f"{k[0]} {k[1]}"))
            first = len(cells)
            for method, variant in methods:
                row = [f"{attack} ({phase})", f"{method} ({variant})" if variant else method]
                for d in datasets:
                    hit = block[(block["method"] == method) & (block["variant"] == variant) & (block["dataset"] == d)]
                    row.append(_cap(hit.iloc[0]) if len(hit) else "")
                cells.append(row)
            for j, d in enumerate(datasets, start=2):
                scored = [(i, block[(block["method"] == m) & (block["variant"] == v) & (block["dataset"] == d)])
                          for i, (m, v) in enumerate(methods)]
                scored = [(i, hit.iloc[0]) for i, hit in scored if len(hit) and not math.isnan(hit["cap"].iloc[0])]
                if len(scored) > 1:
                    tied = tied_with_best([(r["cap"], 0.0 if pd.isna(r["cap_std"]) else r["cap_std"], int(r["n_seeds"]))
                                           for _, r in scored])
                    best |= {(first + scored[k][0], j) for k in tied}
        tables[defense] = Table(
            f"{defense}: CAP = mean over its strengths of U × (1 − A), mean ± std over seeds (higher is better)",
            ["attack (phase)", "method", *(f"{d} (U: {utility_label(metrics[d])})" for d in datasets)], cells, best,
            note="worst-case: at each strength and seed the strongest attack or the prior; bold where methods are "
                 "compared: the best CAP of an attack's column and those not significantly below it (one-sided Welch "
                 "t-test over seeds, p >= 0.05)" + (f"; † {NON_FEDERATED}" if any("n/a" in c for r in cells for c in r)
                                                  else ""))
    return tables


def _cap(r: pd.Series) -> str:
    return cap_cell(r["cap"], r["cap_std"], n=int(r["n_seeds"]), status=r["status"], dagger=True)
