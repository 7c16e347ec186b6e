"""vflpriv: label leakage in vertical federated learning with pretraining, and what defenses cost.

The command line's operations for notebooks, returning pandas DataFrames:

    import vflpriv
    runs = vflpriv.evaluate({"method": {"name": "fedhssl"}, "seeds": [0, 1]}, out="vflpriv-out")
    caps = vflpriv.cap_table(runs)                   # CAP per (method, dataset, attack, defense, phase)
    again = vflpriv.load_results("vflpriv-out/results.sqlite")
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from vflpriv.common import moved
from vflpriv.store.folders import DEFAULT_OUT

moved.install()  # the module paths 0.1's plugin guide published, with a DeprecationWarning (vflpriv.common.moved)

if TYPE_CHECKING:
    import pandas as pd

    from vflpriv.config.sweep import ExperimentConfig

__all__ = ["cap_table", "evaluate", "load_results", "sweep"]


def evaluate(
    config: ExperimentConfig | dict[str, Any] | str | Path, *, out: str | Path = DEFAULT_OUT["evaluate"],
    store: str | Path | None = None, jobs: int | None = None, address: str | None = None, overwrite: bool = False,
) -> pd.DataFrame:
    """Run (or resume) an experiment like ``vflpriv evaluate`` and return its runs, one row per record (the
    columns of :func:`load_results`).

    ``config`` is an :class:`~vflpriv.config.sweep.ExperimentConfig`, a dict of the same settings, or the path of a
    YAML/TOML experiment file. Writes what the command writes into ``out``: ``results.csv``, ``cap.csv`` (with a
    swept defense), ``tradeoff.png`` and the store.
    """
    from vflpriv.common.console import make_console
    from vflpriv.config.parse import read_config_file, resolve_method_options, validate
    from vflpriv.config.sweep import ExperimentConfig
    from vflpriv.workflows.experiment import evaluate_experiment

    if isinstance(config, (str, Path)):
        config = read_config_file(Path(config))
    if isinstance(config, dict):
        config = dict(config)
        resolve_method_options(config)
    experiment = config if isinstance(config, ExperimentConfig) else validate(ExperimentConfig, config)
    if jobs is not None:
        experiment = experiment.model_copy(update={"jobs": jobs})
    return evaluate_experiment(experiment, Path(out), store_path=Path(store) if store else None, address=address,
                               console=make_console(quiet=True), show_progress=False, overwrite=overwrite)


def sweep(grid: dict[str, Any] | str | Path, *, out: str | Path = DEFAULT_OUT["sweep"], store: str | Path | None = None,
          jobs: int | None = None, overwrite: bool = False) -> pd.DataFrame:
    """Run (or resume) a grid like ``vflpriv sweep`` (a dict or a grid file) and return its runs (the columns of
    :func:`load_results`); writes ``results.csv``, ``skipped.csv``, ``cap.csv`` and the store into ``out``."""
    from vflpriv.common.console import make_console
    from vflpriv.config.parse import read_config_file
    from vflpriv.tradeoff.grid import expand
    from vflpriv.workflows.experiment import run_grid

    g = expand(read_config_file(Path(grid)) if isinstance(grid, (str, Path)) else grid)
    if jobs is not None:
        g.jobs = jobs
    return run_grid(g, Path(out), store_path=Path(store) if store else None, console=make_console(quiet=True),
                    show_progress=False, overwrite=overwrite)


def load_results(store: str | Path) -> pd.DataFrame:
    """Every run in a results store (one row per record, with a ``variant`` column naming varying settings)."""
    from vflpriv.reports.results import load_results as load

    return load(store)


def cap_table(results: pd.DataFrame) -> pd.DataFrame:
    """CAP (mean over strengths of U x (1 - A)) per seed, then mean and std over seeds, with a status."""
    from vflpriv.tradeoff.cap import cap_table as table
    from vflpriv.tradeoff.variants import with_variants

    return table(results if "variant" in results else with_variants(results))
