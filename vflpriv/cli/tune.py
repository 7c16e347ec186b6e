"""``vflpriv tune``: the weakest strength of a defense at which an attack falls to the adversary's prior."""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Optional

import typer

from vflpriv.cli.app import DRY_RUN, QUIET, STORE_PATH, app
from vflpriv.cli.evaluate import build_experiment
from vflpriv.common.console import make_console, plural
from vflpriv.common.errors import ConfigError
from vflpriv.config.registry import ATTACKS
from vflpriv.store import cache
from vflpriv.store.folders import DEFAULT_OUT, default_store

#: Bisection steps at most: 30 halvings narrow any strength interval below a billionth of it.
MAX_STEPS = 30


@app.command()
def tune(
    method: Optional[str] = typer.Option(None, help="VFL method; default splitnn"),
    attack: Optional[str] = typer.Option(None, help="one attack; default mc"),
    defense: str = typer.Option("iso", help="the defense whose strength is tuned"),
    dataset: Optional[str] = typer.Option(None, help="dataset; default digits"),
    seeds: Optional[str] = typer.Option(None, help="seeds the leakage is averaged over, e.g. 0,1,2"),
    phase: Optional[str] = typer.Option(None, help="phase attacked and defended: pretrain or finetune"),
    tolerance: float = typer.Option(0.02, help="leakage (attack - prior accuracy) that counts as fallen to the prior"),
    low: Optional[float] = typer.Option(None, help="weakest strength searched (default: the defense's axis)"),
    high: Optional[float] = typer.Option(None, help="strongest strength searched (default: the defense's axis)"),
    steps: int = typer.Option(6, help=f"bisection steps after the two ends (0 to {MAX_STEPS})"),
    out: Path = typer.Option(Path(DEFAULT_OUT["tune"]), help="output directory (tune.json, results.csv, store)"),
    config: Optional[Path] = typer.Option(None, help="YAML or TOML experiment file"),
    preset: Optional[str] = typer.Option(None, help="named settings under --config (vflpriv list presets)"),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="override a setting: key.path=value (repeatable)"),
    jobs: Optional[int] = typer.Option(None, help="parallel trainings"),
    store: Optional[Path] = STORE_PATH,
    device: Optional[str] = typer.Option(None, help="torch device"),
    overwrite: bool = typer.Option(False, "--overwrite", help="replace another experiment's results.csv in --out; recompute stored runs of other data"),
    quiet: bool = QUIET,
    dry_run: bool = DRY_RUN,
) -> None:
    """Bisect a defense's strength (log scale) for the weakest at which an attack falls to the prior, over seeds."""
    import pandas as pd

    from vflpriv.config.parse import validate
    from vflpriv.config.registry import DEFENSES
    from vflpriv.config.sweep import own_strength_option
    from vflpriv.tradeoff.sweep import check
    from vflpriv.tradeoff.tune import found_text, tune as bisect
    from vflpriv.workflows.experiment import run_into_store, write_results

    if defense == "none" or "," in (attack or ""):
        raise ConfigError("tune takes one attack and one defense (not none)")
    experiment = build_experiment(config=config, method=method, attack=attack, defense=defense, dataset=dataset,
                                  strengths=None, seeds=seeds, phase=phase, jobs=jobs, backend=None, device=device,
                                  overrides=set_, preset=preset)
    tuned = next(i for i, d in enumerate(experiment.defenses) if d.sweep)
    if option := own_strength_option(experiment.defenses[tuned]):  # the shared check would blame --strengths
        raise ConfigError(f"tune searches {defense}'s {DEFENSES.get(defense).axis.name}, but defenses.{tuned}.options."
                          f"{option} fixes it: remove it (or run evaluate with it)")
    if experiment.attack.prior == "none":
        raise ConfigError("tune compares the attack with the adversary's prior; attack.prior cannot be none")
    if getattr(ATTACKS.get(experiment.attack.names()[0]), "secret", "labels") != "labels":
        raise ConfigError(f"tune bisects a defense for a label attack's accuracy; '{experiment.attack.names()[0]}' "
                          "infers features: sweep the defense with evaluate, or read the audit's 'falls to the prior'")
    if experiment.partition.aux_features is not None:  # the shared refusal's "add a feature attack" is refused above
        raise ConfigError(f"partition.aux_features={experiment.partition.aux_features} is set, but only a feature "
                          "attack reads it, and tune takes a label attack; remove it")
    if not 0 <= tolerance <= 1:
        raise ConfigError(f"--tolerance must lie in [0, 1], got {tolerance:g}")
    if not 0 <= steps <= MAX_STEPS:
        raise ConfigError(f"--steps must lie in [0, {MAX_STEPS}] (each step halves the interval), got {steps}")
    axis = DEFENSES.get(defense).axis
    lo, hi = low if low is not None else axis.search[0], high if high is not None else axis.search[1]
    if not (math.isfinite(lo) and math.isfinite(hi)):  # inf passed the bounds of an axis that ends at inf (iso)
        raise ConfigError(f"--low/--high must be finite strengths, got low={lo:g}, high={hi:g}")
    if not (axis.low <= lo < hi <= axis.high) or (axis.log and lo <= 0):
        raise ConfigError(f"--low/--high must satisfy {axis.low:g} <= low < high <= {axis.high:g}"
                          + (" and low > 0 (log scale)" if axis.log else ""))
    data = experiment.model_dump(exclude={"seed"})
    with cache.held_back(keep=not dry_run):  # the whole config checks out, leaving the cache as it was on a refusal
        check(validate(type(experiment), {**data, "strengths": [lo]}).runs())
    console = make_console()
    template = _without_strength(experiment.runs()[0])
    frames = []

    @functools.cache
    def tuned_here() -> dict[str, bool]:
        """Whether each run of the store is this experiment at some strength (read without writing, once: only the
        first step guards --out; a damaged record is not known to be this tune's)."""
        from vflpriv.store.sqlite import read_store

        path = store or default_store(out)
        records = read_store(path).records if path.is_file() and path.stat().st_size else []
        return {r.key: _without_strength(json.loads(r.config)) == template for r in records}

    def owns(key: str) -> bool:
        """A run listed in --out belongs to this tune if it is this experiment at some strength."""
        return tuned_here().get(key, False)

    if dry_run:  # both ends checked as the first step would; the steps between depend on what they measure
        ends = [r for s in (lo, hi) for r in validate(type(experiment), {**data, "strengths": [s]}).runs()]
        run_into_store(ends, out, jobs=experiment.jobs, backend=experiment.backend, store_path=store,
                       console=console, overwrite=overwrite, owns=owns, dry_run=True)
        each = len(ends) // 2
        scale = " on a log scale" if axis.log else ""
        console.print(f"tune: {defense}'s {axis.name} bisected over [{lo:g}, {hi:g}]{scale}"
                      f": both ends, then at most {steps} step(s), {plural(each, 'run')} each: at most "
                      f"{plural((steps + 2) * each, 'run')}")
        return

    def evaluate(strength: float):
        point = validate(type(experiment), {**data, "strengths": [strength]})
        step = f"strength {len(frames) + 1} of at most {steps + 2} ({axis.name}={strength:g})"  # both ends + steps
        frame = run_into_store(point.runs(), out, jobs=experiment.jobs, backend=experiment.backend,
                               runs_per_gpu=experiment.runs_per_gpu, store_path=store,
                               console=make_console(quiet=True), overwrite=overwrite or bool(frames), owns=owns,
                               write_csv=False, show_progress=not quiet, label=f"tune: {step}, runs")
        frames.append(frame)
        mine = set(pd.concat(frames)["key"])  # this tune's results.csv lists its earlier steps' runs
        write_results(pd.concat(frames).drop_duplicates("key"), out, store_path=store or default_store(out),
                      owns=None if overwrite else lambda key: key in mine or owns(key))
        ok = frame[frame["status"] == "ok"]
        console.print(f"{step}: attack {ok['attack_accuracy'].mean():.3f}, prior "
                      f"{ok['prior_accuracy'].mean():.3f}, utility {ok['utility'].mean():.3f} "
                      f"({plural(len(ok), 'seed')})")
        return frame

    result = bisect(evaluate, axis=axis.name, stronger_is_lower=axis.stronger == "lower", low=lo, high=hi,
                    log=axis.log, tolerance=tolerance, steps=steps)
    (out / "tune.json").write_text(json.dumps(result.to_dict(), indent=2, allow_nan=False) + "\n")
    if result.found is None:
        console.print(f"{defense}: the attack is not shown within {tolerance:g} of the prior up to {axis.name}="
                      f"{result.points[0].strength:g} (leakage {result.points[0].leakage:+.3f}, its paired test: "
                      f"{result.points[0].verdict}); {result.runs} runs")
    else:
        from vflpriv.reports.tables import mean_std

        f = result.found
        found = found_text(result, attack=experiment.attack.names()[0], stronger_is_lower=axis.stronger == "lower")
        console.print(f"{defense}: {found}; utility {mean_std(f.utility, f.utility_std, n=f.seeds)}; "
                      f"{len(result.points)} strengths, {result.runs} runs")


def _without_strength(config) -> dict:
    """A run's configuration as JSON data, without the swept defense's strength: the same for every tuned point."""
    data = dict(config) if isinstance(config, dict) else config.as_read().model_dump(mode="json", exclude={"device"})
    data.pop("device", None)
    data["defenses"] = [{k: v for k, v in d.items() if not (k == "strength" and d.get("sweep"))}
                        for d in data.get("defenses", [])]
    return data
