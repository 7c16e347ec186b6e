"""Results of a store as a DataFrame, and the tables, figures and HTML report written from them
(``vflpriv table``, ``vflpriv report``, ``vflpriv.load_results``)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from vflpriv.common.errors import ConfigError
from vflpriv.reports.canaries import epsilon_tables
from vflpriv.reports.features import feature_html
from vflpriv.reports.html import render_report
from vflpriv.reports.leakage import leakage_rows, leakage_table, prior_strength_tables, verdicts
from vflpriv.reports.paper_tables import Table, cap_csv, cap_tables, reference_table, strength_tables, t_dcs_tables
from vflpriv.reports.plots import tradeoff_figures
from vflpriv.reports.tables import strength_rows
from vflpriv.store.provenance import versions
from vflpriv.store.records import RunRecord
from vflpriv.store.sqlite import read_store
from vflpriv.tradeoff.cap import cap_table, strength_summary
from vflpriv.tradeoff.epsilon import epsilon_table
from vflpriv.tradeoff.variants import with_variants


def load_results(store: Path | str) -> pd.DataFrame:
    """Every record of a results store (the file, or an output directory holding ``results.sqlite``), one row
    per run, with a ``variant`` column (see ``tradeoff.variants``). The store is only read. Damaged records are
    left out and listed as (key, what is wrong) in ``frame.attrs["damaged"]``; a store with no run that checks
    out is a ConfigError."""
    path = Path(store)
    if path.is_dir() and (path / "results.sqlite").is_file():
        path = path / "results.sqlite"
    if not path.is_file():
        raise ConfigError(f"no results store at {path} (give results.sqlite or the directory that holds it)")
    found = read_store(path)
    if not found.records:
        if found.damaged:
            raise ConfigError(f"every record of results store {path} is damaged ({len(found.damaged)}; the first, "
                              f"run {found.damaged[0][0]}: {found.damaged[0][1]})")
        raise ConfigError(f"results store {path} holds no runs; write runs into it with evaluate, sweep or audit")
    frame = with_variants(pd.DataFrame([r.to_dict() for r in found.records], columns=RunRecord.columns()))
    frame.attrs["damaged"] = found.damaged
    return frame


def select(results: pd.DataFrame, *, attack: str | None, defense: str | None, phase: str | None) -> pd.DataFrame:
    """The records of the given attack / defense / phase (None: all); refuses a filter that keeps nothing."""
    for column, value in (("attack", attack), ("defense", defense), ("phase", phase)):
        if value is not None:
            present = sorted(results[column].unique())
            if value not in present:
                raise ConfigError(f"no run with {column} '{value}' in the store; present: {', '.join(present) or 'none'}")
            results = results[results[column] == value]
    return results


def tables(results: pd.DataFrame) -> list[Table]:
    caps = cap_table(results)
    found = [*cap_tables(caps), *t_dcs_tables(caps), *strength_tables(strength_summary(results)),
             *prior_strength_tables(results)]
    reference = reference_table(results)
    return found + ([reference] if reference is not None else []) + epsilon_tables(results)


def write_tables(results: pd.DataFrame, out: Path) -> list[Table]:
    """cap_tables.{md,tex,csv}: the CAP tables, the Table XI rows and the references, in each format."""
    out.mkdir(parents=True, exist_ok=True)
    found = tables(results)
    (out / "cap_tables.md").write_text("\n".join(t.markdown() for t in found))
    (out / "cap_tables.tex").write_text("\n".join(t.latex() for t in found))
    cap_csv(cap_table(results)).to_csv(out / "cap_tables.csv", index=False)
    strength_rows(strength_summary(results)).to_csv(out / "strength_rows.csv", index=False)
    rows = leakage_rows(results)
    if not rows.empty:
        rows.to_csv(out / "leakage.csv", index=False)
    empirical = epsilon_table(results[results["canaries"] > 0])
    if not empirical.empty:
        empirical.to_csv(out / "epsilon_table.csv", index=False)
    return found


def write_report(results: pd.DataFrame, out: Path, *, store: Path) -> Path:
    """report.html (self-contained), next to the tables and the figures in PNG, SVG and PDF."""
    found = write_tables(results, out)
    summary = strength_summary(results)
    figures = tradeoff_figures(summary, out) if not summary.empty else []
    context = {"results store": str(store), "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
               "versions": versions()}
    damaged = results.attrs.get("damaged", [])
    if damaged:
        context["damaged records left out"] = "; ".join(f"run {key}: {problem}" for key, problem in damaged)
    rows = leakage_rows(results)
    page = render_report(results, title="vflpriv results", tables=found, figures=figures, context=context,
                         leakage=leakage_table(rows), verdicts=verdicts(rows), features=feature_html(results, out))
    path = out / "report.html"
    path.write_text(page)
    return path
