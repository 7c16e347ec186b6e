"""``vflpriv evaluate``: run an experiment into the store, then write results, CAP and the plot."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from vflpriv.reports.plots import tradeoff_plot
from vflpriv.reports.tables import cap_rich_table, strength_table
from vflpriv.tradeoff.cap import cap_table, strength_summary
from vflpriv.tradeoff.sweep import check, sweep
from vflpriv.config import ExperimentConfig
from vflpriv.store import Store


def evaluate_experiment(
    experiment: ExperimentConfig,
    out: Path,
    *,
    store_path: Path | None = None,
    address: str | None = None,
    console: Console | None = None,
    show_progress: bool = True,
) -> int:
    """Run (or resume) the sweep and write ``results.csv``, ``cap.csv``, ``vflpriv.tradeoff.png`` into ``out``.

    Returns the number of failed runs; CAP counts only complete, successful seeds.
    """
    console = console or Console()
    configs = experiment.runs()
    check(configs)
    out.mkdir(parents=True, exist_ok=True)
    progress = Progress(TextColumn("runs"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=Console(stderr=True), transient=True, disable=not show_progress)
    with Store(store_path or out / "results.sqlite") as store, progress:
        task = progress.add_task("runs", total=len(configs), completed=sum(store.done(c.key()) for c in configs))
        results = sweep(configs, store, jobs=experiment.jobs, backend=experiment.backend, address=address,
                        on_done=lambda _record: progress.advance(task), checked=True)
    results.drop(columns=["config"]).to_csv(out / "results.csv", index=False)
    caps = cap_table(results)
    caps.to_csv(out / "cap.csv", index=False)
    summary = strength_summary(results)
    if not summary.empty:
        tradeoff_plot(summary, out / "tradeoff.png")
        console.print(strength_table(summary))
    console.print(cap_rich_table(caps))
    for _, row in caps.iterrows():
        console.print(f"CAP {row['method']} / {row['attack']} / {row['defense']} ({row['phase']}): "
                      f"{row['cap']:.4f} ± {row['cap_std']:.4f} over {int(row['n_seeds'])} seeds")
    console.print(f"wrote {out / 'results.csv'}, {out / 'cap.csv'}, {out / 'tradeoff.png'}")
    return int((results["status"] != "ok").sum())
