"""``vflpriv reproduce``: run a paper's table analogue and write the paper's numbers and claims beside vflpriv's."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from vflpriv.cli.app import DRY_RUN, QUIET, app, command_line, fail
from vflpriv.common.console import make_console
from vflpriv.common.errors import ConfigError
from vflpriv.store import cache
from vflpriv.store.folders import DEFAULT_OUT, default_store


@app.command()
def reproduce(
    name: Optional[str] = typer.Argument(None, metavar="NAME", help="the analogue (vflpriv reproduce --list)"),
    list_: bool = typer.Option(False, "--list", help="list the shipped analogues with their papers and claims"),
    quick: bool = typer.Option(False, "--quick", help="a few-minute version on bundled data (one seed, small budgets)"),
    out: Optional[Path] = typer.Option(None, help="output directory (default "
                                      f"{DEFAULT_OUT['reproduce'].format(name='NAME', quick='[-quick]')})"),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE",
                                   help="override a setting of every part, e.g. seeds=[0,1,2,3,4] or a budget"),
    jobs: Optional[int] = typer.Option(None, help="parallel trainings (default 2)"),
    device: Optional[str] = typer.Option(None, help="torch device, e.g. cpu or cuda"),
    overwrite: bool = typer.Option(False, "--overwrite", help="replace another experiment's results.csv in --out; recompute stored runs of other data"),
    quiet: bool = QUIET,
    dry_run: bool = DRY_RUN,
) -> None:
    """Run a table analogue (resumable) and write reproduction.md: vflpriv's numbers, the paper's, each claim."""
    from vflpriv.workflows import reproductions

    console = make_console()
    if list_ and name is not None:
        raise ConfigError(f"--list lists every analogue and takes no NAME (got '{name}'); run vflpriv reproduce --list")
    if list_:
        for analogue in map(reproductions.load, reproductions.names()):
            console.print(f"{analogue.name}: {analogue.title} ({analogue.paper})")
            for claim in analogue.claims:
                console.print(f"  {claim.get('id', '')}: {' '.join(str(claim.get('text', '')).split())}")
        return
    if name is None:
        raise ConfigError(f"give an analogue, or --list; valid analogues: {', '.join(reproductions.names())}")
    analogue = reproductions.load(name)
    overrides = list(set_) + [f"{k}={v}" for k, v in (("jobs", jobs), ("device", device)) if v is not None]
    out = out or Path(DEFAULT_OUT["reproduce"].format(name=name, quick="-quick" if quick else ""))
    grids = analogue.grids(quick=quick, overrides=overrides)
    _require_data(name, grids)
    with cache.held_back(keep=not dry_run):  # a refusal leaves the cache as it was
        runs = _runs(name, grids, list(set_))
    from vflpriv.workflows.experiment import run_into_store

    results = run_into_store(runs, out, jobs=jobs or 2, backend="loky", console=console, show_progress=not quiet,
                               overwrite=overwrite, dry_run=dry_run, store_option=False)
    if results is None:
        return
    from vflpriv.workflows.reproductions.report import records, write

    paths = write(analogue, records(default_store(out), analogue.by, targets=analogue.targets), out,
                  command=command_line(), quick=quick)
    console.print(f"wrote {', '.join(map(str, paths))}")
    failed = int((results["status"] == "failed").sum())
    if failed:
        fail(f"{failed} run(s) failed; their errors are in {out / 'results.csv'} (rerun to retry them)", code=1)


def _runs(name: str, grids: list[dict], overrides: list[str]) -> list:
    """Every planned run of the analogue's parts, each once (parts may share runs). A ``method_options`` pattern of
    the user's ``--set`` must match a method of some part (the analogue's own serve parts selectively)."""
    import fnmatch

    from vflpriv.tradeoff.grid import expand

    found = {}
    for raw in grids:
        for run in expand(raw, must_match=set(), where=f"analogue {name} with your --set").runs:
            found.setdefault(run.key(), run)
    methods = sorted({run.method.name for run in found.values()})
    for assignment in overrides:
        key = assignment.partition("=")[0].split(".")
        if len(key) > 1 and key[0] == "method_options" and not any(fnmatch.fnmatchcase(m, key[1]) for m in methods):
            raise ConfigError(f"--set {assignment}: pattern '{key[1]}' matches no method of this analogue; its "
                              f"methods: {', '.join(methods)}")
    return list(found.values())


def _datasets(raw: dict) -> set[str]:
    """The names of the datasets a grid reads from the files vflpriv looks for (no ``root`` of the user's)."""
    entries = raw.get("datasets") or [raw.get("dataset") or {"name": "digits"}]
    sections = [{"name": e} if isinstance(e, str) else e for e in entries]
    return {s["name"] for s in sections if isinstance(s, dict) and isinstance(s.get("name"), str) and not s.get("root")}


def _require_data(name: str, grids: list[dict]) -> None:
    """Refuse, before anything is planned, loaded or trained, an analogue whose datasets' files are not here (a run
    would fail on each), naming how to get them and the command that checks them."""
    from vflpriv.data.catalog import DATASET_INFO, status

    for dataset in sorted(set().union(*map(_datasets, grids)) & set(DATASET_INFO)):
        present, where, how = status(dataset)
        if not present and where is not None:  # its files are here; the reader is not installed
            raise ConfigError(f"analogue '{name}' needs dataset {dataset}, whose files are here but cannot be read "
                              f"({how}); --quick runs on bundled data")
        if not present:
            raise ConfigError(f"analogue '{name}' needs dataset {dataset}, whose files are not here ({how}); "
                              f"`vflpriv datasets` checks them, --set 'datasets=[{{name: {dataset}, root: DIR}}]' "
                              "points to your copy, and --quick runs on bundled data")
