"""Running a list of runs into a store with progress and resume, and ``vflpriv evaluate`` on top of it."""

from __future__ import annotations

from pathlib import Path

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from vflpriv.config import ExperimentConfig, RunConfig, TrainingConfig, dataset_partition_defaults
from vflpriv.console import make_console
from vflpriv.errors import ConfigError, Interrupted
from vflpriv.folders import writable_folder
from vflpriv.store import Store
from vflpriv.tradeoff.executors import LOCAL_BACKENDS, Warm, prewarm

if TYPE_CHECKING:
    import pandas as pd

#: Columns of the store's records that stay out of results.csv (they are JSON blobs).
STORE_ONLY = ["config", "traffic"]


def run_into_store(
    configs: list[RunConfig],
    out: Path,
    *,
    jobs: int,
    backend: str,
    address: str | None = None,
    store_path: Path | None = None,
    console: Console | None = None,
    show_progress: bool = True,
    header: str = "",
    warm: Warm | None = None,
) -> pd.DataFrame:
    """Validate everything (every training planned, ``out`` writable, the store opened), then run or resume
    the runs and write ``results.csv``; notes (e.g. a recomputed cache entry) are printed. Ctrl-C raises
    :class:`Interrupted` naming the store. ``warm``: workers spawned early (:func:`early_workers`)."""
    console = console or make_console()
    n_trainings = len({c.training_key() for c in configs})
    warm = prewarm(jobs=min(jobs, n_trainings), backend_name=backend, previous=warm)  # they start while this plans
    try:
        if address is not None and backend in LOCAL_BACKENDS:
            raise ConfigError(f"--address is for a dask or ray cluster; backend '{backend}' runs locally")
        from vflpriv.tradeoff.sweep import check, sweep  # torch and the engine: imported while workers warm up

        check(configs)
        writable_folder(out, what="--out")
    except BaseException:
        warm.cancel()
        raise
    progress_console = make_console(stderr=True)
    progress = Progress(TextColumn("runs"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=progress_console, transient=True,
                        disable=not show_progress or not progress_console.is_terminal)
    notes: list[str] = []

    def done(records) -> None:
        progress.advance(task, len(records))
        notes.extend(n for r in records for n in r.notes.split("; ") if n and n not in notes)

    store_path = store_path or out / "results.sqlite"
    with Store(store_path) as store, progress:
        if header:  # everything checked: from here on, output is results
            console.print(header)
        task = progress.add_task("runs", total=len(configs), completed=sum(store.done(c.key()) for c in configs))
        try:
            results = sweep(configs, store, jobs=jobs, backend=backend, address=address, on_done=done, checked=True)
        except KeyboardInterrupt:
            raise Interrupted(f"interrupted; the finished runs are kept in {store_path} (run the same command "
                              "to resume)") from None
    results.drop(columns=STORE_ONLY).to_csv(out / "results.csv", index=False)
    for note in notes:
        console.print(f"note: {note}")
    console.print(f"{len(configs)} runs on {n_trainings} trainings; wrote {out / 'results.csv'}")
    return results


def early_workers(data: dict[str, Any]) -> Warm:
    """Spawn a sweep's local workers from its raw, not yet validated settings, so that they import torch
    while this process does too; :func:`run_into_store` then resizes or stops them to what it needs."""
    jobs = data.get("jobs", ExperimentConfig.model_fields["jobs"].get_default(call_default_factory=True))
    backend = data.get("backend", "loky")
    if not isinstance(jobs, int) or isinstance(jobs, bool) or not 2 <= jobs <= 1024 or backend != "loky":
        return Warm()  # validation will say what is wrong, or there is nothing to spawn
    return prewarm(jobs=jobs, backend_name=backend)


def partition_line(config: TrainingConfig) -> str:
    """The partition in use, naming the fields that came from the dataset's own defaults."""
    p = config.partition
    defaults = dataset_partition_defaults(config.dataset.name)
    own = [k for k, v in defaults.items() if getattr(p, k) == v]
    line = (f"partition: {p.parties} parties, {p.aligned_fraction:.0%} aligned, {p.labeled} labeled, "
            f"{p.aux} auxiliary ({p.aux_source}), adversary party {p.adversary}")
    return line + (f" ({', '.join(own)}: {config.dataset.name}'s defaults)" if own else "")


def evaluate_experiment(
    experiment: ExperimentConfig,
    out: Path,
    *,
    store_path: Path | None = None,
    address: str | None = None,
    console: Console | None = None,
    show_progress: bool = True,
    warm: Warm | None = None,
) -> int:
    """Run (or resume) the sweep and write ``results.csv``, ``cap.csv``, ``tradeoff.png`` (one per attack) into ``out``.

    Returns the number of failed runs; CAP says which sweeps are incomplete.
    """
    console = console or make_console()
    results = run_into_store(experiment.runs(), out, jobs=experiment.jobs, backend=experiment.backend,
                             address=address, store_path=store_path, console=console, show_progress=show_progress,
                             header=partition_line(experiment), warm=warm)
    from vflpriv.reports.plots import tradeoff_figures  # matplotlib: once there is something to draw
    from vflpriv.reports.tables import cap_rich_table, strength_table
    from vflpriv.tradeoff.cap import cap_table, strength_summary

    caps = cap_table(results)
    caps.to_csv(out / "cap.csv", index=False)
    summary = strength_summary(results)
    figures = tradeoff_figures(summary, out, formats=("png",)) if not summary.empty else []
    if not summary.empty:
        console.print(strength_table(summary))
    console.print(cap_rich_table(caps))
    for _, row in caps.iterrows():
        what = f"CAP {row['method']} / {row['attack']} / {row['defense']} ({row['phase']}): "
        if row["status"] == "ok":
            console.print(what + f"{row['cap']:.4f} ± {row['cap_std']:.4f} over {int(row['n_seeds'])} seeds")
        elif row["status"].startswith("partial"):
            console.print(what + f"{row['cap']:.4f} ± {row['cap_std']:.4f} over {int(row['n_seeds'])} seeds ({row['status']})")
        else:
            console.print(what + row["status"])
    console.print(f"wrote {', '.join(str(p) for p in [out / 'cap.csv', *figures])}")
    return int((results["status"] == "failed").sum())
