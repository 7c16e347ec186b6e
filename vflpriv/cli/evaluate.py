"""``vflpriv evaluate``: one method, a defense's strength sweep x seeds x attacks."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from vflpriv.cli.app import DRY_RUN, QUIET, STORE_PATH, app, fail
from vflpriv.common.console import make_console
from vflpriv.common.errors import ConfigError
from vflpriv.config.parse import (
    DATASET_SETTINGS,
    apply_options,
    check_shape,
    resolve_dataset_settings,
    resolve_method_options,
    validate,
)
from vflpriv.config.presets import settings, user_patterns
from vflpriv.config.registry import ATTACKS
from vflpriv.config.schema import DefenseConfig, sweeps
from vflpriv.config.sweep import ExperimentConfig
from vflpriv.config.yaml_values import unplain
from vflpriv.store.folders import DEFAULT_OUT


def numbers(text: str, kind: type, option: str) -> list[Any]:
    """``text``'s comma-separated numbers; an empty item ("0,,1", "1,") is refused, not skipped, and so are Unicode
    digits and '_' ("٣", "1_000"), which Python's int and float read, as ``attack.adversary`` refuses them."""
    items = text.split(",") if text.strip() else []
    try:
        if any(not v.strip() or unplain(v) for v in items):
            raise ValueError
        return [kind(v) for v in items]
    except ValueError:
        raise ConfigError(f"{option} expects comma-separated {kind.__name__}s, got '{text}' (ASCII digits, no '_': "
                          f"e.g. {'0,1,2' if kind is int else '0.5,1,2'})") from None


def build_experiment(**options: Any) -> ExperimentConfig:
    """The validated experiment of :func:`experiment_data`'s settings."""
    return validate(ExperimentConfig, experiment_data(**options))


def experiment_data(
    *, config: Optional[Path], method: Optional[str], attack: Optional[str], defense: Optional[str],
    dataset: Optional[str], strengths: Optional[str], seeds: Optional[str], phase: Optional[str],
    jobs: Optional[int], backend: Optional[str], device: Optional[str], overrides: list[str],
    preset: Optional[str] = None, tune_attacks: Optional[bool] = None, search_budget: Optional[int] = None,
    canaries: Optional[int] = None,
) -> dict[str, Any]:
    """The experiment's raw settings: defaults <- preset <- config file <- command-line options <- ``--set``."""
    data = settings(preset=preset, config=config)
    per_dataset = data.pop(DATASET_SETTINGS, None)
    check_shape(ExperimentConfig, data, source=f"config file {config}" if config else f"preset {preset}")
    if phase is not None and phase not in ("pretrain", "finetune"):
        raise ConfigError(f"unknown phase '{phase}'; valid phases: pretrain, finetune")
    kept = None  # the defenses --defense leaves: the file's unswept ones and the one it sweeps
    if defense is not None:
        kept = [d for d in data.get("defenses", []) if not sweeps(d)]
        if defense != "none":
            swept_phase = phase or data.get("attack", {}).get("phase", "finetune")
            kept.append({"name": defense, "phase": swept_phase, "sweep": True})
    names = None if attack is None else [a.strip() for a in attack.split(",")]
    if names is not None and not all(names):  # "", " , ", "mc,": read as the attack '' or repeated '' names
        raise ConfigError(f"--attack '{attack}' names an empty attack; give attack names, comma-separated "
                          f"({', '.join(ATTACKS.names())})")
    apply_options(data, [  # as typed, not parsed
        ("--method", ("method", "name"), method), ("--dataset", ("dataset", "name"), dataset),
        ("--phase", ("attack", "phase"), phase), ("--jobs", ("jobs",), jobs), ("--backend", ("backend",), backend),
        ("--device", ("device",), device), ("--canaries", ("partition", "canaries"), canaries),
        ("--tune-attacks/--no-tune-attacks", ("attack", "tune"), tune_attacks),
        ("--search-budget", ("attack", "search_budget"), search_budget),
        ("--attack", ("attack", "name"), names if names is None or len(names) > 1 else names[0]),
        ("--strengths", ("strengths",), None if strengths is None else numbers(strengths, float, "--strengths")),
        ("--seeds", ("seeds",), None if seeds is None else numbers(seeds, int, "--seeds")),
        ("--defense", ("defenses",), kept)], overrides, said={"--defense": lambda value: swept(value, phase)})
    if defense not in (None, "none") and phase is None:
        follows_attack(data, defense, swept_phase)
    resolve_method_options(data, must_match=user_patterns(data, preset))
    resolve_dataset_settings(data, per_dataset)
    return data


def swept(defenses: Any, phase: Optional[str]) -> Any:
    """What ``--defense`` says of ``defenses``: which one is swept (its name, and its phase where ``--phase`` gave it,
    as validation reads it: a section without one acts in ``DefenseConfig``'s default phase, review last2 R4); fixed
    defenses beside it (a config's, a ``--set``'s) and the swept one's other settings refine it."""
    if not isinstance(defenses, list) or not all(isinstance(d, dict) for d in defenses):
        return defenses
    default = DefenseConfig.model_fields["phase"].default
    return [(d.get("name"), d.get("phase", default) if phase is not None else None) for d in defenses
            if sweeps(d)]  # sweep read as validation reads it: "false" is false, "yes" true (reviews last2 R4, l4)


def follows_attack(data: dict[str, Any], defense: str, swept_phase: str) -> None:
    """``--defense`` without ``--phase`` sweeps the defense in the attacked phase the config gives; a ``--set`` that
    then moves the attack to the other phase (the swept defense left where it was) is refused: the defense would act
    in a phase the attack does not read, or after it, and measure nothing (review last2's aside, lo3 F1)."""
    attack = data.get("attack")
    now = attack.get("phase", "finetune") if isinstance(attack, dict) else None
    if now == swept_phase or now not in ("pretrain", "finetune"):  # an unknown phase: validation names it
        return
    default = DefenseConfig.model_fields["phase"].default
    if any(sweeps(d) and d.get("phase", default) != now
           for d in data.get("defenses") or []):
        raise ConfigError(f"--defense {defense} sweeps it in {swept_phase}, the attacked phase before the --set, but a "
                          f"--set makes the attacked phase {now}; give --phase {now} to attack and defend {now}")


TUNE_ATTACKS = typer.Option(None, "--tune-attacks/--no-tune-attacks", help="select each attack's settings on the "
                            "adversary's auxiliary labels (attack.tune); records also get the oracle bound")
SEARCH_BUDGET = typer.Option(None, help="candidates per tuned attack (attack.search_budget; default 8)")
CANARIES = typer.Option(None, help="random-label canaries among the labeled training samples (partition.canaries): "
                        "each attack's guesses of them give an empirical lower bound on the label-DP epsilon")


@app.command()
def evaluate(
    method: Optional[str] = typer.Option(None, help="VFL method (vflpriv list methods); default splitnn"),
    attack: Optional[str] = typer.Option(None, help="attack(s) on the labels or on a party's features, comma-separated, all on one training "
                                         "per (strength, seed) (vflpriv list attacks); default mc"),
    defense: Optional[str] = typer.Option(None, help="defense whose strength is swept in the attacked phase (--phase, "
                                          "else the config's attack.phase), or 'none'"),
    dataset: Optional[str] = typer.Option(None, help="dataset (vflpriv list datasets); default digits"),
    strengths: Optional[str] = typer.Option(None, help="swept defense strengths, e.g. 1,5,25"),
    seeds: Optional[str] = typer.Option(None, help="seeds, e.g. 0,1,2"),
    phase: Optional[str] = typer.Option(None, help="phase attacked, and defended by --defense: pretrain or finetune"),
    out: Path = typer.Option(Path(DEFAULT_OUT["evaluate"]),
                             help="output directory (results.csv, cap.csv, tradeoff.png)"),
    config: Optional[Path] = typer.Option(None, help="YAML or TOML experiment file"),
    preset: Optional[str] = typer.Option(None, help="named settings under --config (vflpriv list presets)"),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="override a setting: key.path=value (repeatable)"),
    jobs: Optional[int] = typer.Option(None, help="parallel trainings (joblib workers)"),
    backend: Optional[str] = typer.Option(None, help="loky (local), threading, dask or ray"),
    address: Optional[str] = typer.Option(None, help="Dask scheduler / Ray cluster address"),
    store: Optional[Path] = STORE_PATH,
    device: Optional[str] = typer.Option(None, help="torch device, e.g. cpu or cuda"),
    overwrite: bool = typer.Option(False, "--overwrite", help="replace another experiment's results.csv in --out; recompute stored runs of other data"),
    tune_attacks: Optional[bool] = TUNE_ATTACKS,
    search_budget: Optional[int] = SEARCH_BUDGET,
    canaries: Optional[int] = CANARIES,
    quiet: bool = QUIET,
    dry_run: bool = DRY_RUN,
) -> None:
    """Sweep a defense's strength x seeds for one method and attack; write results, CAP and a plot."""
    from vflpriv.workflows.experiment import early_workers, evaluate_experiment

    data = experiment_data(
        config=config, method=method, attack=attack, defense=defense, dataset=dataset, strengths=strengths,
        seeds=seeds, phase=phase, jobs=jobs, backend=backend, device=device, overrides=set_, preset=preset,
        tune_attacks=tune_attacks, search_budget=search_budget, canaries=canaries,
    )
    warm = early_workers(data) if not dry_run else None  # they import torch while this process validates
    try:
        experiment = validate(ExperimentConfig, data)
    except BaseException:
        if warm is not None:
            warm.cancel()
        raise
    results = evaluate_experiment(experiment, out, store_path=store, address=address, console=make_console(),
                                  warm=warm, overwrite=overwrite, show_progress=not quiet, dry_run=dry_run)
    if results is None:
        return
    failed = int((results["status"] == "failed").sum())
    if failed:
        fail(f"{failed} run(s) failed; their errors are in {out / 'results.csv'} (rerun to retry them)", code=1)
