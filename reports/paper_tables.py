"""Tables in the forms papers use, from records only (FedHSSL Tables VII/XII and XI), as Markdown, CSV and LaTeX.

- CAP tables: one per (attack, defense, phase); rows = methods (and their variants), columns = datasets (each
  naming its utility metric U), cells "CAP ± std" over seeds, the best of each column and those tied with it
  within seed noise marked (bold; ``best`` in the CSV; the rule is the table's note). A sweep without a CAP
  (incomplete, not applicable) shows its status instead of a number.
- Strength tables (Table XI): per dataset, rows = methods, one column per strength holding
  "A / U" (attack accuracy / utility, means over seeds; a feature attack's: its MSE / utility, per adversary and
  victim).
- References: the utility of non-federated methods (attacks do not apply to them), marked as such.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pandas as pd

from vflpriv.common.secret_kinds import FEATURES, LABELS
from vflpriv.reports.tables import (EPSILON_NOTE, attack_roles, cap_cell, claim_cell, claimed_seeds, claims_shown,
                                    mean_std, roles)
from vflpriv.tradeoff.cap import strength_label

CONTEXT = ["attack", "defense", "phase"]
#: Characters LaTeX needs escaped or set in math mode.
TEX = str.maketrans({"\\": "\\textbackslash{}", "_": "\\_", "%": "\\%", "&": "\\&", "#": "\\#",
                     "±": "$\\pm$", "λ": "$\\lambda$", "×": "$\\times$", "−": "$-$", "†": "$^\\dagger$"})
NON_FEDERATED = "non-federated: attacks do not apply"


@dataclass
class Table:
    """A titled grid of cells (row labels first); ``best`` marks cells to emphasise."""

    title: str
    columns: list[str]
    rows: list[list[str]]
    best: set[tuple[int, int]]
    note: str = ""

    def markdown(self) -> str:
        lines = [f"### {self.title}", "", "| " + " | ".join(self.columns) + " |",
                 "| " + " | ".join("---" for _ in self.columns) + " |"]
        for r, row in enumerate(self.rows):
            lines.append("| " + " | ".join(f"**{c}**" if (r, j) in self.best else c for j, c in enumerate(row)) + " |")
        return "\n".join(lines + (["", self.note] if self.note else [])) + "\n"

    def latex(self) -> str:
        def tex(text: str) -> str:
            return text.translate(TEX)

        lines = ["\\begin{table}[t]", "\\centering", f"\\caption{{{tex(self.title)}}}",
                 "\\begin{tabular}{l" + "c" * (len(self.columns) - 1) + "}", "\\toprule",
                 " & ".join(tex(c) for c in self.columns) + " \\\\", "\\midrule"]
        for r, row in enumerate(self.rows):
            cells = [f"\\textbf{{{tex(c)}}}" if (r, j) in self.best else tex(c) for j, c in enumerate(row)]
            lines.append(" & ".join(cells) + " \\\\")
        lines += ["\\bottomrule", "\\end{tabular}"]
        if self.note:
            lines.append(f"\\par\\footnotesize {tex(self.note)}")
        return "\n".join(lines + ["\\end{table}"]) + "\n"

    def html(self, *, title: bool = True) -> str:
        """The table as HTML, under its title (``title`` off: a section that holds it names it)."""
        import html

        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join(
            "<tr>" + "".join(f"<td class='best'>{html.escape(c)}</td>" if (r, j) in self.best else f"<td>{html.escape(c)}</td>"
                             for j, c in enumerate(row)) + "</tr>" for r, row in enumerate(self.rows))
        note = f"<p class='note'>{html.escape(self.note)}</p>" if self.note else ""
        heading = f"<h3>{html.escape(self.title)}</h3>" if title else ""
        return f"{heading}<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note}"


def _row_label(method: str, variant: str) -> str:
    return f"{method} ({variant})" if variant else method


def natural(text: str) -> list:
    """Sort key putting ``labeled=200`` before ``labeled=1000``."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


#: One-sided level of the test that separates a CAP from the best of its column.
ALPHA = 0.05
BOLD_RULE = ("bold: the highest CAP of each column and every CAP not significantly below it (one-sided Welch t-test "
             f"over seeds, p >= {ALPHA:g}), i.e. tied with the best within seed noise")
ONE_SEED_RULE = "bold: the highest CAP of each column (one seed: no spread, so no test of ties; run more seeds for one)"


def tied_with_best(cells: list[tuple[float, float, int]]) -> set[int]:
    """Positions of the best (mean, std over seeds with ddof 0, seeds) cell and of every cell not significantly below
    it (one-sided Welch t-test, p >= ALPHA). With fewer than two seeds on either side there is no test: only cells
    equal to the best count as tied."""
    from scipy import stats

    if not cells:
        return set()
    top = max(range(len(cells)), key=lambda i: cells[i][0])
    m_b, s_b, n_b = cells[top]
    tied = set()
    for i, (m, s, n) in enumerate(cells):
        if math.isclose(m, m_b) or i == top:
            tied.add(i)
            continue
        if n < 2 or n_b < 2:
            continue
        v_b, v = s_b ** 2 * n_b / (n_b - 1) / n_b, s ** 2 * n / (n - 1) / n  # squared standard errors
        if v_b + v == 0:
            continue  # no spread and different means: significantly below
        t = (m_b - m) / math.sqrt(v_b + v)
        df = (v_b + v) ** 2 / ((v_b ** 2 / (n_b - 1) if v_b else 0) + (v ** 2 / (n - 1) if v else 0))
        if stats.t.sf(t, df) >= ALPHA:
            tied.add(i)
    return tied


def _dataset_column(dataset: str, part: pd.DataFrame) -> str:
    metrics = sorted({m for m in part.loc[part["dataset"] == dataset, "utility_metric"] if isinstance(m, str) and m}) \
        if "utility_metric" in part else []
    return f"{dataset} (U: {', '.join(metrics)})" if metrics else dataset


def cap_tables(caps: pd.DataFrame) -> list[Table]:
    """One methods x datasets CAP table per (attack, defense, phase); each column names its utility metric (U) and
    marks its best CAP and those tied with it within seed noise (:data:`BOLD_RULE`). No defense has no CAP (CAP
    averages over a defense's strengths): no table for it."""
    caps = caps.assign(variant=caps["variant"] if "variant" in caps else "")
    caps = caps[caps["defense"] != "none"]
    extra = roles(caps)
    tables = []
    for keys, part in caps.groupby([*CONTEXT, *(["secret"] if extra else []), *extra], sort=False, dropna=False):
        (attack, defense, phase), values = keys[:3], dict(zip(["secret", *extra], keys[3:]))
        features = values.get("secret") == "features"
        datasets = sorted(set(part["dataset"]), key=natural)
        labels = sorted({_row_label(m, v) for m, v in zip(part["method"], part["variant"])}, key=natural)
        cells = {(_row_label(r.method, r.variant), r.dataset): r for r in part.itertuples()}
        rows, best = [], set()
        for label in labels:
            row = [label]
            for d in datasets:
                r = cells.get((label, d))
                row.append("" if r is None else cap_cell(r.cap, r.cap_std, n=int(r.n_seeds), status=r.status,
                                                         dagger=True))
            rows.append(row)
        for j, d in enumerate(datasets, start=1):
            scored = [(i, cells[(label, d)]) for i, label in enumerate(labels)
                      if (label, d) in cells and not pd.isna(cells[(label, d)].cap)]
            tied = tied_with_best([(r.cap, 0.0 if pd.isna(r.cap_std) else r.cap_std, int(r.n_seeds)) for _, r in scored])
            best |= {(scored[k][0], j) for k in tied}
        several = bool((part["n_seeds"] > 1).any())
        notes = [BOLD_RULE if several else ONE_SEED_RULE] + (["† " + NON_FEDERATED] if any("n/a†" in c for row in rows for c in row) else [])
        score = "U × min(1, attack MSE / prior MSE)" if features else "U × (1 − A)"
        tables.append(Table(f"CAP = mean over the strengths of {score}; attack {attack_roles(attack, values)}, "
                            f"defense {defense} ({phase}); {'mean ± std over seeds' if several else 'one seed'}",
                            ["method", *(_dataset_column(d, part) for d in datasets)], rows, best, "; ".join(notes)))
    return tables


def strength_tables(summary: pd.DataFrame) -> list[Table]:
    """Table XI: per (dataset, attack, defense, phase), "A / U" at each strength for each method."""
    summary = summary.assign(variant=summary["variant"] if "variant" in summary else "")
    extra = roles(summary)
    tables = []
    for keys, part in sorted(summary.groupby(["dataset", *CONTEXT, *(["secret"] if extra else []), *extra],
                                             dropna=False), key=lambda g: [natural(str(k)) for k in g[0]]):
        (dataset, attack, defense, phase), values = keys[:4], dict(zip(["secret", *extra], keys[4:]))
        features = values.get("secret") == "features"
        lower = part["strength_stronger"] == "lower" if "strength_stronger" in part else part["strength_axis"] == "epsilon"
        strengths = sorted(part["strength"].unique(), reverse=bool(lower.any()))
        axis = str(part["strength_axis"].iloc[0])
        rows = []
        for (method, variant), rows_m in sorted(part.groupby(["method", "variant"]), key=lambda g: natural(_row_label(*g[0]))):
            by = {r.strength: r for r in rows_m.itertuples()}
            rows.append([_row_label(method, variant)] + [_strength_cell(by[s], digits=4 if features else 3)
                                                         if s in by else "" for s in strengths])
        metric = str(part["utility_metric"].iloc[0])
        score = "attack MSE (features scaled to [0, 1]; lower leaks more)" if features else "attack accuracy A"
        tables.append(Table(f"{dataset}: {score} / utility U ({metric}) at each strength; attack "
                            f"{attack_roles(attack, values)}, defense {defense} ({phase}); means over seeds",
                            ["method", *(strength_label(axis, s) for s in strengths)], rows, set(),
                            EPSILON_NOTE if claims_shown(part, FEATURES if features else LABELS) else ""))
    return tables


def _strength_cell(r, *, digits: int = 3) -> str:
    """"A / U" (a feature attack's: "MSE / U"), with the epsilon a DP defense spent there."""
    cell = f"{r.attack_accuracy_mean:.{digits}f} / {r.utility_mean:.3f}"
    strongest = getattr(r, "strongest", "")
    claim = f" (ε {claim_cell(r)})" if claimed_seeds(r) > 0 else ""
    return cell + claim + (f" ({strongest})" if isinstance(strongest, str) and strongest else "")


def t_dcs_tables(caps: pd.DataFrame) -> list[Table]:
    """VFLAIR's T-DCS per phase: rows = (method, defense), columns = datasets, the mean DCS over the attacks."""
    from vflpriv.tradeoff.cap import t_dcs

    scores = t_dcs(caps[caps["defense"] != "none"].assign(variant=caps["variant"] if "variant" in caps else ""))
    tables = []
    keys = ["phase", *[c for c in ("secret", "adversary", "victim") if c in scores]]  # one secret and victim a table
    for values, part in scores.groupby(keys, sort=False, dropna=False):
        phase, who = values[0], dict(zip(keys, values))
        on = f"; {attack_roles('attacks', who)}" if who.get("secret") == "features" else ""
        datasets = sorted(set(part["dataset"]), key=natural)
        labels = sorted({(_row_label(m, v), d) for m, v, d in zip(part["method"], part["variant"], part["defense"])},
                        key=lambda k: (natural(k[0]), k[1]))
        cells = {(_row_label(r.method, r.variant), r.defense, r.dataset): r for r in part.itertuples()}
        rows = [[f"{m} / {d}", *(f"{cells[(m, d, ds)].t_dcs:.3f}" if (m, d, ds) in cells else "" for ds in datasets)]
                for m, d in labels]
        tables.append(Table(f"T-DCS ({phase}{on}): mean over the attacks of VFLAIR's DCS (chance-normalised attack "
                            "accuracy, beta 0.5), higher is better", ["method / defense", *datasets], rows, set(),
                            "attacks averaged: " + "; ".join(sorted({", ".join(sorted(a.split(", "))) for a in part["attacks"]}))))
    return tables


def reference_table(results: pd.DataFrame) -> Table | None:
    """Utility of the non-federated references (their records are n/a for every attack)."""
    refs = results[results["status"] == "n/a"].drop_duplicates("training_key")
    if refs.empty:
        return None
    refs = refs.assign(variant=refs["variant"] if "variant" in refs else "")
    datasets = list(dict.fromkeys(refs["dataset"]))
    rows = []
    for (method, variant), part in refs.groupby(["method", "variant"], sort=False):
        stats = part.groupby("dataset")["utility"].agg(["mean", lambda c: c.std(ddof=0), "count"])
        rows.append([_row_label(method, variant) + "†"] + [
            mean_std(stats.loc[d].iloc[0], stats.loc[d].iloc[1], n=int(stats.loc[d].iloc[2])) if d in stats.index
            else "" for d in datasets])
    return Table("Non-federated references: utility, mean ± std over seeds", ["method", *datasets], rows, set(),
                 "† " + NON_FEDERATED)


def cap_csv(caps: pd.DataFrame) -> pd.DataFrame:
    """The CAP tables in long form with a ``best`` flag per (attack, defense, phase, dataset): the bold cells of
    :func:`cap_tables` (the best and those tied with it within seed noise); none for no defense."""
    caps = caps[caps["defense"] != "none"] if len(caps) else caps
    caps = caps.assign(variant=caps["variant"] if "variant" in caps else "").reset_index(drop=True)
    best = pd.Series(False, index=caps.index)
    for _, part in caps[caps["cap"].notna()].groupby([*CONTEXT, *roles(caps), "dataset"], dropna=False):
        tied = tied_with_best([(r.cap, 0.0 if pd.isna(r.cap_std) else r.cap_std, int(r.n_seeds)) for r in part.itertuples()])
        best[part.index[sorted(tied)]] = True
    return caps.assign(best=best)
