"""An analogue's records as a table (method and options x the ``by`` setting: mean ± std over seeds of utility,
finetuning messages and MB, attack, prior, leakage), and ``reproduction.md``: the paper's numbers, vflpriv's, and
each claim's verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from vflpriv.reports.html import render_report
from vflpriv.reports.paper_tables import Table
from vflpriv.reproductions import Analogue
from vflpriv.reproductions.claims import Verdict, judge
from vflpriv.results import load_results

COLUMNS = {"utility": "utility", "comm_messages_finetune": "finetune messages", "comm_mb_finetune": "finetune MB",
           "attack_accuracy": "attack", "prior_accuracy": "prior", "leakage": "leakage"}


def records(store: Path, by: str) -> pd.DataFrame:
    """The store's usable runs (ok, and n/a: a non-federated reference has a utility) with their method options
    (``options``) and their value of the dotted setting ``by`` (``by``), read from each run's config."""
    runs = load_results(store)
    runs = runs[runs["status"].isin(["ok", "n/a"])].copy()
    configs = runs["config"].map(json.loads)
    runs["options"] = configs.map(lambda c: c["method"].get("options") or {})
    runs["by"] = configs.map(lambda c: _get(c, by))
    return runs


def _get(config: dict, dotted: str):
    value = config
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


#: Columns that count (the same on every seed of a setting): printed as their mean, without decimals.
COUNTS = ("comm_messages_finetune",)


def _cell(values: pd.Series, *, count: bool = False) -> str:
    x = values.astype(float).dropna()
    if x.empty:
        return "n/a"
    if count:
        return f"{x.mean():.0f}"
    return f"{x.mean():.3f} ± {x.std(ddof=1):.3f}" if len(x) > 1 else f"{x.mean():.3f}"


def table(runs: pd.DataFrame, by: str) -> Table:
    """vflpriv's side: one row per (method and options, ``by`` value)."""
    runs = runs.assign(row=runs["method"] + runs["options"].map(
        lambda o: f" ({', '.join(f'{k}={v}' for k, v in sorted(o.items()))})" if o else ""))
    rows = []
    for (row, value), g in runs.groupby(["row", runs["by"].astype(str)], sort=True):
        cells = [_cell(g[c], count=c in COUNTS) if c in g else "n/a" for c in COLUMNS]
        rows.append([row, value, str(g["seed"].nunique()), *cells])
    return Table("vflpriv", ["method", by, "seeds", *COLUMNS.values()], rows, set(),
                 note="mean ± std over seeds; messages and MB of the finetuning phase (inference excluded)")


def paper_table(analogue: Analogue) -> Table | None:
    if not analogue.paper_numbers:
        return None
    keys = list(dict.fromkeys(k for row in analogue.paper_numbers for k in row))
    return Table("The paper", keys, [[str(row.get(k, "")) for k in keys] for row in analogue.paper_numbers], set())


def claims_table(found: list[Verdict]) -> Table:
    return Table("Claims", ["claim", "verdict", "why"], [[f"{v.id}: {v.text}", v.verdict, v.reason] for v in found],
                 {(i, 1) for i, v in enumerate(found)},
                 note="held: a one-sided Welch test over seeds at 5%, an exact count, or a 95% interval below a bound")


def write(analogue: Analogue, runs: pd.DataFrame, out: Path, *, command: str, quick: bool) -> list[Path]:
    """``reproduction.md`` and ``reproduction.html`` in ``out``."""
    found = [judge(claim, runs) for claim in analogue.claims]
    tables = [t for t in (table(runs, analogue.by), paper_table(analogue), claims_table(found)) if t is not None]
    context = {"paper": analogue.paper, "command": command, "how this analogue differs": analogue.setting}
    if quick:
        changed = ", ".join(f"{k} = {v}" for k, v in analogue.quick.items())
        context["quick run"] = (f"--quick, not the recorded budget: {changed}; with one seed the claims have no "
                                "test: read them as a smoke check")
    lines = [f"# {analogue.title}", "", *(f"- {k}: {v}" for k, v in context.items()), ""]
    lines += [t.markdown() for t in tables]
    md, page = out / "reproduction.md", out / "reproduction.html"
    md.write_text("\n".join(lines))
    page.write_text(render_report(runs.drop(columns=["options", "by"]), title=analogue.title, tables=tables,
                                  figures=[], context=context))
    return [md, page]
