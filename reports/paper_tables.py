"""Tables in the forms papers use, from records only (FedHSSL Tables VII/XII and XI), as Markdown, CSV and LaTeX.

- CAP tables: one per (attack, defense, phase); rows = methods (and their variants), columns = datasets,
  cells "CAP ± std" over seeds, the best of each column marked (bold; ``best`` in the CSV). A sweep
  without a CAP (incomplete, not applicable) shows its status instead of a number.
- Strength tables (Table XI): per dataset, rows = methods, one column per strength holding
  "A / U" (attack accuracy / utility, means over seeds).
- References: the utility of non-federated methods (attacks do not apply to them), marked as such.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pandas as pd

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

    def html(self) -> str:
        import html

        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join(
            "<tr>" + "".join(f"<td class='best'>{html.escape(c)}</td>" if (r, j) in self.best else f"<td>{html.escape(c)}</td>"
                             for j, c in enumerate(row)) + "</tr>" for r, row in enumerate(self.rows))
        note = f"<p class='note'>{html.escape(self.note)}</p>" if self.note else ""
        return f"<h3>{html.escape(self.title)}</h3><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note}"


def _row_label(method: str, variant: str) -> str:
    return f"{method} ({variant})" if variant else method


def natural(text: str) -> list:
    """Sort key putting ``labeled=200`` before ``labeled=1000``."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def _pm(mean: float, std: float) -> str:
    return "n/a" if pd.isna(mean) else f"{mean:.3f} ± {std:.3f}"


def cap_tables(caps: pd.DataFrame) -> list[Table]:
    """One methods x datasets CAP table per (attack, defense, phase); the highest CAP of a column is marked."""
    caps = caps.assign(variant=caps["variant"] if "variant" in caps else "")
    tables = []
    for (attack, defense, phase), part in caps.groupby(CONTEXT, sort=False):
        datasets = sorted(set(part["dataset"]), key=natural)
        labels = sorted({_row_label(m, v) for m, v in zip(part["method"], part["variant"])}, key=natural)
        cells = {(_row_label(r.method, r.variant), r.dataset): r for r in part.itertuples()}
        rows, best = [], set()
        for label in labels:
            row = [label]
            for d in datasets:
                r = cells.get((label, d))
                row.append("" if r is None else _pm(r.cap, r.cap_std) if not pd.isna(r.cap) else
                           ("n/a†" if str(r.status).startswith("n/a") else str(r.status)))
            rows.append(row)
        for j, d in enumerate(datasets, start=1):
            scored = [(cells[(label, d)].cap, i) for i, label in enumerate(labels)
                      if (label, d) in cells and not pd.isna(cells[(label, d)].cap)]
            if scored:
                top = max(c for c, _ in scored)
                best |= {(i, j) for c, i in scored if math.isclose(c, top)}
        note = "† " + NON_FEDERATED if any("n/a†" in c for row in rows for c in row) else ""
        tables.append(Table(f"CAP = mean over the strengths of U × (1 − A); attack {attack}, defense {defense} "
                            f"({phase}); mean ± std over seeds, best per dataset in bold",
                            ["method", *datasets], rows, best, note))
    return tables


def strength_tables(summary: pd.DataFrame) -> list[Table]:
    """Table XI: per (dataset, attack, defense, phase), "A / U" at each strength for each method."""
    summary = summary.assign(variant=summary["variant"] if "variant" in summary else "")
    tables = []
    for (dataset, attack, defense, phase), part in sorted(summary.groupby(["dataset", *CONTEXT]),
                                                          key=lambda g: [natural(str(k)) for k in g[0]]):
        strengths = sorted(part["strength"].unique(), reverse=bool((part.get("strength_axis") == "epsilon").any()))
        axis = str(part["strength_axis"].iloc[0])
        rows = []
        for (method, variant), rows_m in sorted(part.groupby(["method", "variant"]), key=lambda g: natural(_row_label(*g[0]))):
            by = {r.strength: r for r in rows_m.itertuples()}
            rows.append([_row_label(method, variant)] + [
                f"{by[s].attack_accuracy_mean:.3f} / {by[s].utility_mean:.3f}" if s in by else "" for s in strengths])
        metric = str(part["utility_metric"].iloc[0])
        tables.append(Table(f"{dataset}: attack accuracy A / utility U ({metric}) at each strength; attack {attack}, "
                            f"defense {defense} ({phase}); means over seeds",
                            ["method", *(strength_label(axis, s) for s in strengths)], rows, set()))
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
        stats = part.groupby("dataset")["utility"].agg(["mean", lambda c: c.std(ddof=0)])
        rows.append([_row_label(method, variant) + "†"] + [
            _pm(stats.loc[d].iloc[0], stats.loc[d].iloc[1]) if d in stats.index else "" for d in datasets])
    return Table("Non-federated references: utility, mean ± std over seeds", ["method", *datasets], rows, set(),
                 "† " + NON_FEDERATED)


def cap_csv(caps: pd.DataFrame) -> pd.DataFrame:
    """The CAP tables in long form with a ``best`` flag per (attack, defense, phase, dataset)."""
    caps = caps.assign(variant=caps["variant"] if "variant" in caps else "")
    top = caps.groupby([*CONTEXT, "dataset"])["cap"].transform("max")
    return caps.assign(best=caps["cap"].notna() & (caps["cap"] >= top - 1e-12))
