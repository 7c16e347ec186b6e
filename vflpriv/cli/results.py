"""``vflpriv sweep`` (a grid into one store), ``vflpriv table`` and ``vflpriv report`` (from a store)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from vflpriv.cli.app import DRY_RUN, QUIET, STORE_PATH, app, fail
from vflpriv.cli.evaluate import CANARIES, SEARCH_BUDGET, TUNE_ATTACKS
from vflpriv.common.console import make_console
from vflpriv.common.errors import ConfigError
from vflpriv.config.parse import apply_options
from vflpriv.config.presets import settings, user_patterns
from vflpriv.store import cache
from vflpriv.store.folders import DEFAULT_OUT, STORE_NAME
from vflpriv.store.verification import shown_data

STORE = typer.Argument(..., metavar="STORE", help=f"a results store ({STORE_NAME}, or the --out directory holding it) "
                       "written by evaluate, sweep, audit or tune")
FILTERS = {
    "attack": typer.Option(None, help="only this attack"),
    "defense": typer.Option(None, help="only this (swept) defense"),
    "phase": typer.Option(None, help="only this attacked phase"),
}


@app.command()
def sweep(
    config: Path = typer.Argument(..., metavar="GRID_FILE", help="grid file: an experiment file with methods, datasets, attacks, axes"),
    out: Path = typer.Option(Path(DEFAULT_OUT["sweep"]), help="output directory (results, CAP, store)"),
    dry_run: bool = DRY_RUN,
    preset: Optional[str] = typer.Option(None, help="named settings under the grid file (vflpriv list presets)"),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="override a setting of the grid: key.path=value"),
    jobs: Optional[int] = typer.Option(None, help="parallel trainings (default: the grid's, else 2)"),
    backend: Optional[str] = typer.Option(None, help="loky (local), threading, dask or ray"),
    address: Optional[str] = typer.Option(None, help="Dask scheduler / Ray cluster address"),
    device: Optional[str] = typer.Option(None, help="torch device of every run, e.g. cpu, cuda (spread over the "
                                                    "visible GPUs) or cuda:1"),
    store: Optional[Path] = STORE_PATH,
    overwrite: bool = typer.Option(False, "--overwrite", help="replace another experiment's results.csv in --out; recompute stored runs of other data"),
    tune_attacks: Optional[bool] = TUNE_ATTACKS,
    search_budget: Optional[int] = SEARCH_BUDGET,
    canaries: Optional[int] = CANARIES,
    quiet: bool = QUIET,
) -> None:
    """Run a grid (methods x datasets x attacks x any axis x strengths x seeds) into one store; resumable."""
    from vflpriv.tradeoff.executors import Warm
    from vflpriv.workflows.experiment import early_workers

    raw = settings(preset=preset, config=config)
    apply_options(raw, [
        ("--jobs", ("jobs",), jobs), ("--backend", ("backend",), backend), ("--device", ("device",), device),
        ("--tune-attacks/--no-tune-attacks", ("attack", "tune"), tune_attacks),
        ("--search-budget", ("attack", "search_budget"), search_budget),
        ("--canaries", ("partition", "canaries"), canaries)], set_)  # disagreeing with a --set: refused
    warm = early_workers(raw) if not dry_run else Warm()  # they import torch while this process does
    try:
        from vflpriv.tradeoff.grid import expand
        from vflpriv.workflows.experiment import run_grid

        with cache.held_back(keep=not dry_run):  # a refusal leaves the cache as it was
            grid = expand(raw, must_match=user_patterns(raw, preset))
    except BaseException:
        warm.cancel()
        raise
    console = make_console()
    if grid.skipped:
        console.print(f"{len(grid.skipped)} cell(s) of the grid set aside:")
    for cell in grid.skipped:
        console.print(f"  set aside: {cell.method} / {cell.dataset} / {cell.attack}: {cell.reason}")
    results = run_grid(grid, out, store_path=store, address=address, console=console, warm=warm, overwrite=overwrite,
                       show_progress=not quiet, dry_run=dry_run)
    if results is None:
        return
    failed = int((results["status"] == "failed").sum())
    if failed:
        fail(f"{failed} run(s) failed; their errors are in {out / 'results.csv'} (rerun to retry them)", code=1)


@app.command()
def table(store: Path = STORE, out: Path = typer.Option(Path(DEFAULT_OUT["table"]), help="output directory"),
          attack: Optional[str] = FILTERS["attack"], defense: Optional[str] = FILTERS["defense"],
          phase: Optional[str] = FILTERS["phase"]) -> None:
    """CAP tables (methods x datasets) and per-strength rows as Markdown, CSV and LaTeX (booktabs)."""
    from vflpriv.reports.results import not_written, write_tables

    results = _read(store, out, attack=attack, defense=defense, phase=phase)
    found, written = write_tables(results, out)
    console = make_console()
    for t in found:
        console.print(t.markdown(), markup=False)  # a variant in brackets is text, not a style tag
    console.print("wrote " + ", ".join(map(str, written)))
    stale = not_written(out, written)
    if stale:
        console.print(f"left as they were, not from these records: {', '.join(map(str, stale))}")


@app.command()
def report(store: Path = STORE, out: Path = typer.Option(Path(DEFAULT_OUT["report"]), help="output directory"),
           attack: Optional[str] = FILTERS["attack"], defense: Optional[str] = FILTERS["defense"],
           phase: Optional[str] = FILTERS["phase"],
           formats: str = typer.Option("png", help="figure files, comma-separated: png, svg, pdf (png is always "
                                                    "written: the page embeds it)")) -> None:
    """One self-contained HTML report (tables, figures, configuration, versions), plus the tables and figures."""
    from vflpriv.reports.results import FIGURE_FORMATS, write_report

    chosen = tuple(dict.fromkeys(f.strip().lower() for f in formats.split(",") if f.strip()))
    unknown = [f for f in chosen if f not in FIGURE_FORMATS]
    if unknown or not chosen:
        raise ConfigError(f"--formats {formats!r}: {'unknown ' + ', '.join(unknown) if unknown else 'empty'}; valid "
                          f"formats: {', '.join(FIGURE_FORMATS)}")
    path = write_report(_read(store, out, attack=attack, defense=defense, phase=phase), out, store=store,
                        formats=chosen)
    make_console().print(f"wrote {path} (and the tables and figures beside it)")


def _read(store: Path, out: Path, **filters: str | None):
    """The store's runs (read only), filtered; then ``out`` checked writable: nothing is written before both
    check out. Damaged records are named on stderr, one line each (at most 5), and left out."""
    from vflpriv.reports.results import KEPT, load_results, select, withheld_warning
    from vflpriv.store.folders import writable_folder

    results = select(load_results(store), **filters)
    damaged = results.attrs.get("damaged", [])
    warn = make_console(stderr=True)
    for key, problem in damaged[:5]:
        warn.print(f"warning: damaged record left out: run {key}: {problem}", markup=False)
    if len(damaged) > 5:
        warn.print(f"warning: {len(damaged) - 5} more damaged record(s) left out", markup=False)
    if withheld := withheld_warning(results.attrs.get("withheld")):  # rather than shown unjudged (review acct F2)
        warn.print(withheld, markup=False)
    if mixed := results.attrs.get("mixed"):  # options.secure_noise resumed by an earlier vflpriv: two trainings
        warn.print(f"warning: {len(mixed)} record(s) of secure-noise trainings left out: one training key holds "
                   f"records of two trainings (the first, run {mixed[0]}); run the command that wrote them again to "
                   "recompute each training whole", markup=False)
    superseded = results.attrs.get("superseded", [])
    if superseded:  # e.g. a revised attack's runs recomputed beside the old ones: one seed counted once
        counts = [(sum(why.endswith(f"({kept})") for _, why in superseded), case) for kept, case in KEPT.values()]
        cases = [f"{n} {case}" for n, case in counts if n]
        warn.print(f"warning: {len(superseded)} record(s) of a run stored under another key left out, one record per "
                   f"run kept ({'; '.join(cases)}; the first: run {superseded[0][0]}: "
                   f"{superseded[0][1]})", markup=False)
    if "data_fingerprint" in results.columns:  # a data file changed between the runs of one store
        for dataset, rows in results.groupby(results["dataset"] + results["config"].map(_data_setting), sort=False):
            found = sorted(set(rows["data_fingerprint"]))
            if len(found) > 1:
                shown = ", ".join(shown_data(f, 12, empty="as bundled or unrecorded") for f in found)
                warn.print(f"warning: the runs of {dataset} were computed on {len(found)} different data "
                           f"(data_fingerprint {shown}), "
                           "pooled here; rerun them into this store with --overwrite to recompute the runs of the "
                           "other data", markup=False)
    writable_folder(out, what="--out")
    return results


def _data_setting(config: object) -> str:
    """Besides the dataset's name, what sets one data set apart in a stored run's config (its folder, ``max_samples``,
    its parties): runs that differ there read other data by design, which is no change of the data file."""
    try:
        parsed = json.loads(config) if isinstance(config, str) and config else {}
    except ValueError:
        parsed = {}
    dataset, partition = (parsed.get(k) if isinstance(parsed.get(k), dict) else {} for k in ("dataset", "partition"))
    found = [f"{k} {v}" for k, v in sorted(dataset.items()) if k != "name" and v is not None]
    found += [f"{partition['parties']} parties"] if partition.get("parties") is not None else []
    return f" ({', '.join(found)})" if found else ""
