"""Running a list of runs into a store with progress and resume, and ``vflpriv evaluate`` on top of it."""

from __future__ import annotations

import csv
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from vflpriv.common.console import make_console, plural
from vflpriv.common.errors import ConfigError, Interrupted
from vflpriv.common.lazy import importing
from vflpriv.common.progress import RunProgress
from vflpriv.common.secret_kinds import FEATURES, SECRETS
from vflpriv.config.schema import RunConfig
from vflpriv.config.sweep import ExperimentConfig
from vflpriv.store import cache
from vflpriv.store.folders import creatable, default_store, usable_folder, writable_folder, write_csv_atomically
from vflpriv.store.secrets import current_fingerprint
from vflpriv.store.sqlite import Store, check_store_path, stored_other_canary_key, stored_other_data
from vflpriv.tradeoff.executors import Warm, check_cluster, prewarm
from vflpriv.workflows.headers import experiment_line, feature_lines, partition_line, secrets_of
from vflpriv.workflows.triage import applicable_attacks, not_applicable_lines

if TYPE_CHECKING:
    import pandas as pd

    from vflpriv.tradeoff.grid import Grid

#: Columns of the store's records that stay out of results.csv (they are JSON blobs).
STORE_ONLY = ["config", "traffic", "utility_curve", "attack_hits", "prior_hits", "attack_trials", "canary_counts",
              "attack_errors", "prior_errors", "feature_mse_per_feature", "feature_examples", "auditor_counts"]


def run_into_store(configs: list[RunConfig], out: Path, *, jobs: int, backend: str, address: str | None = None,
                   runs_per_gpu: int = 1, store_path: Path | None = None, console: Console | None = None,
                   show_progress: bool = True, header: Callable[[], str] | None = None, warm: Warm | None = None,
                   overwrite: bool = False, owns: Callable[[str], bool] | None = None, write_csv: bool = True,
                   label: str = "runs", dry_run: bool = False, prepare: Callable[[], None] | None = None,
                   store_option: bool = True, warn_withheld: bool = True) -> pd.DataFrame | None:
    """Validate everything (every training planned, ``out`` writable and holding no other experiment's results, the
    store opened), then run or resume the runs and write ``results.csv`` (unless ``write_csv`` is off), printing notes;
    Ctrl-C raises :class:`Interrupted` naming the store. ``header()``: lines printed once all checked out; ``warm``:
    workers spawned early; ``owns(key)``: whether a run listed in ``out``'s results.csv is this command's (default: one
    of ``configs``); ``overwrite`` replaces a results.csv of other runs and recomputes stored runs of other data;
    ``label`` names the progress count; ``dry_run``: check all, print the plan, return None, write nothing;
    ``prepare()``: what comes after (a report's imports), run while workers compute the last trainings;
    ``store_option``: the command takes ``--store`` (a refusal after training suggests it); ``warn_withheld``: print
    the warning of epsilons withheld (off where the caller prints it once for several calls)."""
    console = console or make_console()
    n_trainings = len({c.training_key() for c in configs})
    if dry_run:
        if warm is not None:
            warm.cancel()
        warm = Warm()
    else:
        warm = prewarm(jobs=min(jobs, n_trainings), backend_name=backend, previous=warm)  # they start while this plans
    try:
        # torch and the engine, while the workers warm up
        from vflpriv.data.load import data_by_key
        from vflpriv.tradeoff.gap import refuse_other_canary_key, refuse_other_data
        from vflpriv.tradeoff.sweep import check, describe, drop_damaged, sweep, trainings
        from vflpriv.tradeoff.variants import told_apart

        with cache.held_back(keep=not dry_run):  # a refusal (or a dry run) leaves no cache entry
            check(configs)
            store_path = check_destination(out, store_path=store_path, backend=backend, address=address)
            (usable_folder if dry_run else writable_folder)(out, what="--out")
            if not overwrite:
                keys = {c.key() for c in configs}
                guard_outputs(out, owns=owns or keys.__contains__)
                refuse_other_data(stored_other_data(store_path, data_by_key(configs)),
                                  where=str(store_path))
                refuse_other_canary_key(stored_other_canary_key(store_path, list(keys), current_fingerprint()),
                                        where=str(store_path))
    except BaseException:
        warm.cancel()
        raise
    if dry_run:
        if header is not None:
            console.print(header())
        stored = stored_keys(store_path, configs)
        console.print(f"{plural(len(configs), 'run')} on {plural(n_trainings, 'training')}: {len(stored)} already in "
                      f"the store, {len(configs) - len(stored)} to run (dry run: nothing trained, nothing written)")
        return None
    notes: list[str] = []
    apart = told_apart(trainings(configs))  # what tells a training in flight from the others
    progress: RunProgress | None = None
    flight: dict[str, str] = {}  # the trainings in progress, by key: what the progress line says is being done
    finished: dict = {}  # the records this command computed, by key: kept beside a refusal that ends the sweep

    def started(runs) -> None:
        flight[runs[0].training_key()] = describe(runs, apart.get(runs[0].training_key(), ""))
        progress.start(runs[0].training_key())
        progress.doing("; ".join(flight.values()))

    def done(records) -> None:
        finished.update((r.key, r) for r in records)
        flight.pop(records[0].training_key, None)
        progress.doing("; ".join(flight.values()), say=False)  # the line finished() may print says what is left
        fresh = [r for r in records if r.key not in counted]  # a run recomputed (record deleted meanwhile): once
        counted.update(r.key for r in fresh)
        progress.finished(records, new=len(fresh))
        notes.extend(n for r in records for n in r.notes.split("; ") if n and n not in notes)

    def read(keys) -> None:  # runs another sweep computed meanwhile: done at once (the time left does not wait)
        fresh = [k for k in keys if k not in counted]
        counted.update(fresh)
        progress.read(len(fresh))

    with Store(store_path) as store:
        if header is not None:  # everything checked: from here on, output is results
            console.print(header())
        since = time.time()  # another sweep's records from here on are judged as the check judges (GapCheck)
        redo = set(drop_damaged(store, configs, on_note=notes.append, replace_other_data=overwrite))
        counted = {c.key() for c in configs if c.key() not in redo and store.done(c.key())}  # the run replaces redo
        stored = len(counted)
        console.print(f"{plural(len(configs), 'run')} on {plural(n_trainings, 'training')}: {stored} already in "
                      f"the store, {len(configs) - stored} to run")
        try:
            with RunProgress(len(configs), done=stored, console=make_console(stderr=True),
                             quiet=not show_progress, jobs=jobs, label=label) as progress:
                results = sweep(configs, store, jobs=jobs, backend=backend, address=address,
                                runs_per_gpu=runs_per_gpu, on_done=done, on_note=notes.append, on_start=started,
                                on_read=read, on_schedule=progress.plan, on_tail=prepare, checked=True, redo=redo,
                                since=since, replace_other_data=overwrite)
        except KeyboardInterrupt:
            raise Interrupted(f"interrupted; the finished runs are kept in {store_path} (run the same command "
                              "to resume)") from None
        except ConfigError as exc:  # another sweep's doing, after runs finished here (review hunt3 P6)
            if not (finished and write_csv):
                raise
            raise ConfigError(f"{exc}; {kept_aside(list(finished.values()), out)}") from None
    from vflpriv.reports.results import as_read, withheld_warning  # the records as vflpriv table reads them

    results = as_read(results)
    if write_csv:
        write_results(results, out, owns=None if overwrite else owns or {c.key() for c in configs}.__contains__,
                      store_path=store_path, store_option=store_option)
    for note in notes:
        console.print(f"note: {note}")
    if warn_withheld and (withheld := withheld_warning(results.attrs["withheld"])):
        console.print(withheld, markup=False)
    if write_csv:
        console.print(f"wrote {out / 'results.csv'}")
    return results


#: What a sweep's report imports (pandas, matplotlib, the tables and plots).
REPORT_MODULES = ("vflpriv.reports.paper_tables", "vflpriv.reports.plots", "vflpriv.reports.tables",
                  "vflpriv.tradeoff.cap", "vflpriv.tradeoff.variants")


def stored_keys(store_path: Path, configs: list[RunConfig]) -> set[str]:
    """The keys of ``configs`` whose runs ``store_path`` holds final records of on the data the configs read now, read
    without writing; not a damaged record, one of other data, or one of a secure-noise training stored in part."""
    from vflpriv.data.load import data_by_key
    from vflpriv.store.sqlite import FINAL, read_store
    from vflpriv.store.trainings import partly_stored
    from vflpriv.tradeoff.spelling import resumed

    if not store_path.is_file() or store_path.stat().st_size == 0:
        return set()
    data = data_by_key(configs)
    other = {key for key, _ in [*stored_other_data(store_path, data),
                                *stored_other_canary_key(store_path, list(data), current_fingerprint())]}
    by_key = {c.key(): c for c in configs}
    final = [r for r in read_store(store_path).records if r.status in FINAL and r.key in by_key
             and not resumed(r, by_key[r.key])]  # what the run's settings do not say: recomputed (review hunt H5)
    partial = set(partly_stored(configs, final))  # the run recomputes those (review fe2 R1)
    return {r.key for r in final if r.key in data and r.key not in other | partial}


def check_destination(out: Path, *, store_path: Path | None, backend: str, address: str | None) -> Path:
    """Refuse, creating nothing, where results could not go: a cluster that does not answer, an ``out`` that
    cannot be created, a store path that cannot be (or is another program's file); returns the store path."""
    check_cluster(backend, address)
    creatable(out, what="--out", folder=True)
    store_path = store_path or default_store(out)
    check_store_path(store_path)
    return store_path


def guard_outputs(out: Path, *, owns: Callable[[str], bool], kept_in: Path | None = None,
                  store_option: bool = True) -> None:
    """Refuse to replace another experiment's results: a ``results.csv`` in ``out`` listing runs this command does
    not own would be replaced (with ``cap.csv`` and the plots) by one without them. Resuming or widening the same
    experiment (more seeds, another attack) owns every listed run and passes. ``kept_in``: the store this command's
    runs are already in (the check after training), which the error names with how to report them without training
    (another ``--out`` alone would be an empty store); ``store_option``: the command takes ``--store``."""
    path = out / "results.csv"
    if not path.is_file():
        return
    way = "give another --out, or --overwrite to replace {}"
    if kept_in is not None:
        way = (f"this command's runs are kept in {kept_in}: give --overwrite to replace {{}} with theirs"
               + (f", or --out OTHER --store {kept_in} to write them to OTHER without training" if store_option
                  else ""))
    try:
        with path.open(newline="", encoding="utf-8") as f:
            keys = [row["key"] for row in csv.DictReader(f)]
    except (OSError, KeyError, TypeError, UnicodeDecodeError, csv.Error):
        raise ConfigError(f"--out {out} holds a results.csv that vflpriv did not write; {way.format('it')}") from None
    foreign = [k for k in keys if not owns(k)]
    if foreign:
        raise ConfigError(
            f"--out {out} holds another experiment's results: its results.csv lists {plural(len(keys), 'run')}, "
            f"{len(foreign)} of them not part of this one, and would be replaced (with cap.csv and the plots); "
            + (way.format("them") + " (runs in a store stay there)" if kept_in is None else way.format("them")))


def write_results(results: pd.DataFrame, out: Path, *, owns: Callable[[str], bool] | None, store_path: Path,
                  store_option: bool = True) -> None:
    """``out``/results.csv from the runs in ``store_path``, checked again first unless ``owns`` is None (--overwrite):
    another command writing this --out may have finished while this one ran; a write the system refuses is one error
    naming the store that keeps the runs."""
    if owns is not None:
        guard_outputs(out, owns=owns, kept_in=store_path, store_option=store_option)
    path = out / "results.csv"
    try:
        write_csv_atomically(results.drop(columns=STORE_ONLY), path)
    except OSError as exc:
        raise ConfigError(f"could not write {path} ({exc.strerror or exc}); the runs are kept in {store_path}: run the "
                          "same command again once it can be written (the runs kept there are not trained again)"
                          ) from None


def kept_aside(records: list, out: Path) -> str:
    """Where the rows of ``records`` (a sweep's finished runs, as results.csv gives them) were written, when a
    refusal ends the sweep: another sweep on its store may have replaced them there."""
    import pandas as pd

    from vflpriv.reports.results import as_read  # written as results.csv would be: withheld epsilons withheld
    from vflpriv.store.records import RunRecord

    path = out / "finished.csv"
    try:
        rows = as_read(pd.DataFrame([r.to_dict() for r in records], columns=RunRecord.columns()))
        write_csv_atomically(rows.drop(columns=STORE_ONLY), path)
    except OSError as exc:
        return f"the rows of its {plural(len(records), 'finished run')} could not be written ({exc.strerror or exc})"
    return f"the rows of its {plural(len(records), 'finished run')} are in {path} (results.csv is not written)"


def early_workers(data: dict[str, Any]) -> Warm:
    """Spawn a sweep's local workers from its raw, not yet validated settings, so that they import torch
    while this process does too; :func:`run_into_store` then resizes or stops them to what it needs."""
    jobs = data.get("jobs", ExperimentConfig.model_fields["jobs"].get_default(call_default_factory=True))
    backend = data.get("backend", "loky")
    if not isinstance(jobs, int) or isinstance(jobs, bool) or not 2 <= jobs <= 1024 or backend != "loky":
        return Warm()  # validation will say what is wrong, or there is nothing to spawn
    return prewarm(jobs=jobs, backend_name=backend)


def evaluate_experiment(
    experiment: ExperimentConfig,
    out: Path,
    *,
    store_path: Path | None = None,
    address: str | None = None,
    console: Console | None = None,
    show_progress: bool = True,
    warm: Warm | None = None,
    overwrite: bool = False,
    dry_run: bool = False,
) -> pd.DataFrame | None:
    """Run (or resume) the sweep and write ``results.csv``, ``cap.csv`` (with a swept defense) and
    ``tradeoff.png`` (one per attack) into ``out``; returns the runs, one row per record, with their variants
    (``dry_run``: prints the plan and returns None, :func:`run_into_store`).

    The console shows, per strength, utility, attack and prior accuracy and leakage (mean ± std over seeds), and
    CAP when a defense is swept (CAP averages over a defense's strengths; with no defense there is none)."""
    console = console or make_console()
    from vflpriv.runner.planning import refuse_unread_aux_features

    runs = experiment.runs()
    refuse_unread_aux_features(experiment.partition.aux_features, [r.attack.name for r in runs])
    with cache.held_back(keep=not dry_run):  # a refusal leaves the cache as it was
        runs, set_aside = applicable_attacks(runs)

    def header() -> str:
        return "\n".join([experiment_line(experiment), partition_line(experiment, labels="labels" in secrets_of(runs)),
                          *feature_lines(runs),
                          *(f"set aside: attack {name}: {reason}" for name, reason in set_aside)])

    results = run_into_store(runs, out, jobs=experiment.jobs, backend=experiment.backend, address=address,
                             runs_per_gpu=experiment.runs_per_gpu,
                             store_path=store_path, console=console, show_progress=show_progress, header=header,
                             warm=warm, overwrite=overwrite, dry_run=dry_run, prepare=importing(*REPORT_MODULES))
    if results is None:
        return None
    for line in not_applicable_lines(results):
        console.print(line)
    from vflpriv.reports.plots import tradeoff_figures  # matplotlib: once there is something to draw
    from vflpriv.reports.tables import attack_roles, cap_rich_table, mean_std, strength_tables
    from vflpriv.tradeoff.cap import cap_table, strength_summary
    from vflpriv.tradeoff.variants import with_variants

    results = with_variants(results)
    summary = strength_summary(results)
    figures = tradeoff_figures(summary, out, formats=("png",)) if not summary.empty else []
    if not summary.empty:
        for table in strength_tables(summary):
            console.print(table)
    written = []
    if experiment.swept is not None:
        caps = cap_table(results)
        caps.to_csv(out / "cap.csv", index=False)
        written.append(out / "cap.csv")
        console.print(cap_rich_table(caps))
        for _, row in caps.iterrows():
            what = f"CAP {row['method']} / {attack_roles(row['attack'], row)} / {row['defense']} ({row['phase']}): "
            if row["status"] == "ok" or row["status"].startswith("partial"):
                extra = f" ({row['status']})" if row["status"] != "ok" else ""
                n = int(row["n_seeds"])
                console.print(what + f"{mean_std(row['cap'], row['cap_std'], n=n, digits=4)} over "
                              f"{plural(n, 'seed')}{extra}")
            else:
                console.print(what + row["status"])
    else:
        score = {frozenset({FEATURES}): "min(1, attack MSE / prior MSE)",
                 frozenset(SECRETS): "1 − attack accuracy; a feature attack's min(1, attack MSE / prior "
                                                    "MSE)"}.get(frozenset(secrets_of(runs)), "1 − attack accuracy")
        console.print(f"no defense swept, so no CAP (the mean over a defense's strengths of utility × ({score})); "
                      "--defense NAME sweeps one")
    if written or figures:
        console.print(f"wrote {', '.join(str(p) for p in [*written, *figures])}")
    return results


def run_grid(grid: Grid, out: Path, *, store_path: Path | None = None, address: str | None = None,
             console: Console | None = None, show_progress: bool = True, warm: Warm | None = None,
             overwrite: bool = False, dry_run: bool = False) -> pd.DataFrame | None:
    """Run (or resume) an expanded grid (``vflpriv sweep``) and write ``results.csv``, ``skipped.csv`` (the cells
    set aside, with the reason), ``cap.csv`` and the privacy-utility plots (``tradeoff*.png``, one per attack,
    defense and phase, one panel per dataset) into ``out``; returns the runs with their variants (``dry_run``:
    prints the plan and returns None, :func:`run_into_store`)."""
    console = console or make_console()
    results = run_into_store(grid.runs, out, jobs=grid.jobs, backend=grid.backend, address=address,
                             runs_per_gpu=grid.runs_per_gpu,
                             store_path=store_path, console=console, show_progress=show_progress, warm=warm,
                             overwrite=overwrite, dry_run=dry_run,
                             prepare=importing(*REPORT_MODULES, "scipy.stats"))  # the tables' tests of ties
    if results is None:
        return None
    import pandas as pd  # the report's modules: imported once the runs are done (or while the last ones run)

    from vflpriv.reports.paper_tables import cap_tables
    from vflpriv.reports.plots import tradeoff_figures
    from vflpriv.tradeoff.cap import cap_table, strength_summary
    from vflpriv.tradeoff.variants import with_variants

    for line in not_applicable_lines(results):
        console.print(line)
    pd.DataFrame([vars(c) for c in grid.skipped], columns=["method", "dataset", "attack", "reason"]).to_csv(
        out / "skipped.csv", index=False)
    results = with_variants(results)
    caps = cap_table(results)
    caps.to_csv(out / "cap.csv", index=False)
    for table in cap_tables(caps):
        console.print(table.markdown())
    written = [out / "results.csv", out / "cap.csv", *_lr_choice(results, out, console)]
    summary = strength_summary(results)
    figures = tradeoff_figures(summary, out, formats=("png",)) if not summary.empty else []
    console.print(f"wrote {', '.join(str(p) for p in [*written, *figures])}")
    return results


def _lr_choice(results: pd.DataFrame, out: Path, console: Console) -> list[Path]:
    """A grid over finetune.lr: the lr chosen per seed on the validation split (``lr_chosen.csv``) and the CAP of
    those choices (``cap_lr_chosen.csv``); without a validation split, a note that nothing was chosen."""
    from vflpriv.reports.paper_tables import cap_tables
    from vflpriv.tradeoff.cap import cap_table
    from vflpriv.workflows.lr_choice import chosen_on_validation, lr_grid

    chosen = chosen_on_validation(results)
    if chosen is None:
        if len(lr_grid(results)) > 1:
            console.print("note: finetune.lr takes several values but the runs hold no validation split, so no lr is "
                          "chosen (each is its own row; choosing on the test utility would select on the test set); "
                          "set finetune.validation (e.g. 0.2) to choose it per seed")
        return []
    console.print(f"finetune.lr chosen per seed (and strength) on the validation split (the highest utility_val; "
                  f"no ε is recorded for the choice: choosing among {len(lr_grid(results))} trainings of the same "
                  "labels composes them and reads the validation labels without noise):")
    caps = cap_table(chosen)
    for table in cap_tables(caps):
        console.print(table.markdown())
    columns = ["method", "variant", "dataset", "attack", "defense", "phase", "strength", "seed", "selected",
               "utility_val", "utility", "utility_optimistic", "attack_accuracy", "prior_accuracy"]
    chosen[[c for c in columns if c in chosen]].rename(columns={"selected": "lr"}).to_csv(out / "lr_chosen.csv",
                                                                                         index=False)
    caps.to_csv(out / "cap_lr_chosen.csv", index=False)
    return [out / "lr_chosen.csv", out / "cap_lr_chosen.csv"]
