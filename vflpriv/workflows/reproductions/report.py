"""An analogue's records as a table (method and options x the ``by`` setting: mean ± std over seeds of utility,
finetuning messages and MB, attack, prior, leakage), and ``reproduction.md``: the paper's numbers, vflpriv's, and
each claim's verdict."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from vflpriv.reports.html import Section, anchor, render_report
from vflpriv.reports.paper_tables import Table
from vflpriv.reports.results import load_results
from vflpriv.tradeoff.cap import seed_caps
from vflpriv.workflows.reproductions import Analogue
from vflpriv.workflows.reproductions.claims import Verdict, judge, same
from vflpriv.workflows.reproductions.selection import choose, setting_of

COLUMNS = {"utility": "utility", "comm_messages_finetune": "finetune messages", "comm_mb_finetune": "finetune MB",
           "attack_accuracy": "attack", "prior_accuracy": "prior", "leakage": "leakage"}


def records(store: Path, by: str, *, targets: dict | None = None) -> pd.DataFrame:
    """The store's usable runs (ok, and n/a: a non-federated reference has a utility) with their method options
    (``options``) and their value of the dotted setting ``by`` (``by``), read from each run's config; with
    ``targets`` (utility per ``by`` value), ``mb_to_target`` from each run's learning curve."""
    runs = load_results(store)
    runs = runs[runs["status"].isin(["ok", "n/a"])].copy()
    configs = runs["config"].map(json.loads)
    runs["options"] = configs.map(lambda c: c["method"].get("options") or {})
    runs["by"] = configs.map(lambda c: setting_of(c, by))
    if targets:
        runs["target"] = runs["by"].map(lambda v: next((t for k, t in targets.items() if same(k, v)), math.nan))
        curves = runs["utility_curve"] if "utility_curve" in runs else [""] * len(runs)
        runs["mb_to_target"] = [mb_to_target(c, t) for c, t in zip(curves, runs["target"])]
    return runs


def mb_to_target(curve: str, target: float) -> float:
    """The MB sent until the end of the first finetuning epoch whose test utility reaches ``target`` (inf if none
    does; NaN without a curve or a target)."""
    if not isinstance(curve, str) or not curve or math.isnan(target):
        return math.nan
    return next((mb for _, mb, utility, *_ in json.loads(curve) if utility >= target), math.inf)


#: Columns of a selection on validation (the analogue's ``select``).
SELECTION_COLUMNS = {"selected": "chosen", "utility_val": "utility (validation)",
                     "utility_optimistic": "utility optimistic", "attack_accuracy_selection": "attack over the selection"}

#: Columns that count (the same on every seed of a setting): printed as their mean, without decimals.
COUNTS = ("comm_messages_finetune",)


def _cell(values: pd.Series, *, count: bool = False) -> str:
    x = values.astype(float).dropna()
    if x.empty:
        return "n/a"
    if x.isin([math.inf]).any():  # MB to a target some seeds never reached
        reached = x[x != math.inf]
        return (f"{_cell(reached)} " if len(reached) else "never ") + f"({len(reached)}/{len(x)} seeds reached)"
    if count:
        return f"{x.mean():.0f}"
    return f"{x.mean():.3f} ± {x.std(ddof=1):.3f}" if len(x) > 1 else f"{x.mean():.3f}"


def _column(group: pd.DataFrame, column: str) -> str:
    """A table cell: the chosen values with their seed counts (``selected``), else the mean ± std of a number."""
    if column not in group:
        return "n/a"
    if column == "selected":
        counts = group[column].map(repr).value_counts()
        return ", ".join(f"{v} ({n} seed{'s' if n > 1 else ''})" for v, n in counts.items())
    return _cell(group[column], count=column in COUNTS)


def _row_names(runs: pd.DataFrame) -> pd.Series:
    """Each run's table row: its method and the options that tell its rows apart (a preset's options, the same on
    every run of the method, are in the settings, not in every row)."""
    varying = {method: {k for o in group for k in o if len({repr(x.get(k)) for x in group}) > 1}
               for method, group in runs.groupby("method")["options"]}

    def name(method: str, options: dict) -> str:
        shown = sorted((k, v) for k, v in options.items() if k in varying[method])
        return method + (f" ({', '.join(f'{k}={v}' for k, v in shown)})" if shown else "")

    return pd.Series([name(m, o) for m, o in zip(runs["method"], runs["options"])], index=runs.index, dtype=object)


def swept(runs: pd.DataFrame) -> bool:
    """Whether the records sweep a defense's strength (then rows name the strength, and CAP applies)."""
    return bool((runs["defense"] != "none").any())


def table(runs: pd.DataFrame, by: str) -> Table:
    """vflpriv's side: one row per (method and options, ``by`` value, and the defense strength where swept)."""
    keys = ["row", "value"] + (["strength"] if swept(runs) else [])
    runs = runs.assign(row=_row_names(runs), value=runs["by"].astype(str))
    columns = {**COLUMNS, **{c: name for c, name in SELECTION_COLUMNS.items() if c in runs},
               **({"mb_to_target": "MB to target"} if "mb_to_target" in runs else {})}
    rows = [[*map(str, k[:2]), *([f"{k[2]:g}"] if len(k) > 2 else []), str(g["seed"].nunique()),
             *(_column(g, c) for c in columns)] for k, g in _ordered(runs, keys)]
    note = "mean ± std over seeds; messages and MB of the finetuning phase (inference excluded)"
    if "mb_to_target" in runs:
        note += ("; MB to target: pretraining and finetuning MB sent until the first finetuning epoch whose test "
                 "utility reaches the target (finetune.curve)")
    return Table("vflpriv", ["method", by, *(["strength"] if len(keys) > 2 else []), "seeds", *columns.values()],
                 rows, set(), note=note)


def _ordered(frame: pd.DataFrame, keys: list[str]) -> list:
    """``frame`` grouped by ``keys`` (row, ``by`` as text, then the rest), ordered by row, then by the ``by`` value
    as a number where it is one (14 < 72 < 144), then the rest."""
    return sorted(frame.groupby(keys, sort=False),
                  key=lambda kg: (kg[0][0], _number_first(kg[1]["by"].iloc[0]), *kg[0][2:]))


def _number_first(value) -> tuple:
    """A sort key ordering numbers by value (14 < 72 < 144), before anything else."""
    try:
        return (0, float(value), "")
    except (TypeError, ValueError):
        return (1, 0.0, str(value))


#: What a CAP is computed within: every seed's runs of one row over its strengths.
CAP_GROUP = ["method", "row", "by", "dataset", "attack", "defense", "phase"]


def caps(runs: pd.DataFrame) -> pd.DataFrame:
    """CAP per (row, ``by`` value, attack, defense) and seed over the swept strengths, with each row's ``options``
    (for the claims' selectors); empty when no defense is swept."""
    if runs.empty or not swept(runs):
        return pd.DataFrame(columns=[*CAP_GROUP, "seed", "cap", "options"])
    keyed = runs.assign(row=_row_names(runs), by=runs["by"].astype(str))
    found = seed_caps(keyed[keyed["status"] == "ok"], CAP_GROUP)
    options = dict(zip(keyed["row"], keyed["options"]))
    by_value = dict(zip(keyed["by"], runs["by"]))
    return found.assign(options=found["row"].map(options), by=found["by"].map(by_value))


def cap_table(found: pd.DataFrame, by: str) -> Table | None:
    if found.empty:
        return None
    rows = [[row, value, attack, defense, str(g["seed"].nunique()), _cell(g["cap"])] for (row, value, attack, defense), g
            in _ordered(found.assign(value=found["by"].astype(str)), ["row", "value", "attack", "defense"])]
    return Table("CAP", ["method", by, "attack", "defense", "seeds", "CAP"], rows, set(),
                 note="CAP (FedHSSL Definition 1): mean over the swept strengths of utility x (1 - attack accuracy), "
                      "per seed; mean ± std over seeds")


def paper_table(analogue: Analogue) -> Table | None:
    if not analogue.paper_numbers:
        return None
    keys = list(dict.fromkeys(k for row in analogue.paper_numbers for k in row))
    return Table("The paper", keys, [[str(row.get(k, "")) for k in keys] for row in analogue.paper_numbers], set())


def claims_table(found: list[Verdict]) -> Table:
    return Table("Claims", ["claim", "verdict", "why"], [[f"{v.id}: {v.text}", v.verdict, v.reason] for v in found],
                 {(i, 1) for i, v in enumerate(found)},
                 note="held: a one-sided Welch (or one-sample t) test over seeds at 5%, an exact count, a 95% interval "
                      "below a bound, or a 90% interval of the difference within a margin (equivalence)")


def chosen(analogue: Analogue, runs: pd.DataFrame) -> pd.DataFrame:
    """The runs the report and its claims read: with the analogue's ``select``, one per deployment, chosen on
    validation (:func:`~vflpriv.workflows.reproductions.selection.choose`); else all of them."""
    return runs if analogue.select is None else choose(runs, analogue.select, _row_names(runs))


def write(analogue: Analogue, runs: pd.DataFrame, out: Path, *, command: str, quick: bool) -> list[Path]:
    """``reproduction.md`` and ``reproduction.html`` in ``out``; with the analogue's ``select``, of the runs chosen
    on validation (:func:`~vflpriv.workflows.reproductions.selection.choose`)."""
    runs = chosen(analogue, runs)
    per_seed = caps(runs)
    found = [judge(claim, runs, caps=per_seed) for claim in analogue.claims]
    tables = [t for t in (table(runs, analogue.by), cap_table(per_seed, analogue.by), paper_table(analogue),
                          claims_table(found)) if t is not None]
    context = {"paper": analogue.paper, "command": command, "how this analogue differs": analogue.setting}
    if analogue.select is not None:
        sel = analogue.select
        context["selection"] = (f"{sel.setting} chosen per seed from {sel.values} on a validation split of "
                                f"{sel.validation:.0%} of the labeled samples (held out of training); 'utility "
                                "optimistic' is the paper's report (best value and epoch on the test set), 'attack over "
                                "the selection' the strongest attack over every training the adversary took part in")
    if analogue.targets:
        context["target utility"] = ", ".join(f"{analogue.by} {k}: {v}" for k, v in analogue.targets.items())
    if quick:
        changed = ", ".join(f"{k} = {v}" for k, v in analogue.quick.items())
        context["quick run"] = (f"--quick, not the recorded budget: {changed}; with one seed the claims have no "
                                "test: read them as a smoke check")
    lines = [f"# {analogue.title}", "", *(f"- {k}: {v}" for k, v in context.items()), ""]
    lines += [t.markdown() for t in tables]
    md, page = out / "reproduction.md", out / "reproduction.html"
    md.write_text("\n".join(lines))
    sections = [Section(anchor("table", str(i)), t.title, t.html(title=False)) for i, t in enumerate(tables)]
    page.write_text(render_report(runs.drop(columns=["options", "by"]), title=analogue.title, context=context,
                                  sections=sections))
    return [md, page]
