"""The ``vflpriv`` command line (typer). Bad input: one ``error:`` line on stderr and exit code 2."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from typer.core import TyperGroup

from vflpriv.config import ExperimentConfig
from vflpriv.config_io import apply_override, check_shape, read_config_file, validate
from vflpriv.errors import ConfigError, Interrupted, VflprivError
from vflpriv.registry import REGISTRIES


class _ErrorLineGroup(TyperGroup):
    """Turns every usage or input error into one ``error:`` line and exit code 2 (130 for Ctrl-C), no traceback."""

    def invoke(self, ctx):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # before click prints a bare newline for it
            raise Interrupted("interrupted; finished runs are kept in the store") from None

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # type: ignore[override]
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except typer.TyperException as exc:
            _fail(exc.format_message().strip().splitlines()[-1])
        except VflprivError as exc:
            _fail(str(exc), code=exc.exit_code)
        except (typer.Abort, KeyboardInterrupt):
            _fail("interrupted; finished runs are kept in the store", code=Interrupted.exit_code)
        code = code if isinstance(code, int) else 0
        if standalone_mode:
            sys.exit(code)
        return code


def _fail(message: str, *, code: int = 2) -> None:
    sys.stderr.write(f"error: {message}\n")
    sys.exit(code)


app = typer.Typer(cls=_ErrorLineGroup, add_completion=False, pretty_exceptions_enable=False,
                  help="Measure label leakage of VFL methods and the cost of defenses.")


@app.callback(invoke_without_command=True)
def _root(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())


def _numbers(text: str, kind: type, option: str) -> list[Any]:
    try:
        return [kind(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"{option} expects comma-separated {kind.__name__}s, got '{text}'") from None


def build_experiment(
    *, config: Optional[Path], method: Optional[str], attack: Optional[str], defense: Optional[str],
    dataset: Optional[str], strengths: Optional[str], seeds: Optional[str], phase: Optional[str],
    jobs: Optional[int], backend: Optional[str], device: Optional[str], overrides: list[str],
) -> ExperimentConfig:
    """defaults <- config file <- command-line options <- ``--set key=value``."""
    data: dict[str, Any] = read_config_file(config) if config else {}
    check_shape(ExperimentConfig, data, source=f"config file {config}")
    if phase is not None and phase not in ("pretrain", "finetune"):
        raise ConfigError(f"unknown phase '{phase}'; valid phases: pretrain, finetune")
    for key, value in (("method.name", method), ("dataset.name", dataset), ("attack.phase", phase),
                       ("jobs", jobs), ("backend", backend), ("device", device)):
        if value is not None:
            section, _, field = key.rpartition(".")
            (data.setdefault(section, {}) if section else data)[field] = value  # as typed, not parsed
    if attack is not None:
        names = [a.strip() for a in attack.split(",")]
        data.setdefault("attack", {})["name"] = names[0] if len(names) == 1 else names
    if strengths is not None:
        data["strengths"] = _numbers(strengths, float, "--strengths")
    if seeds is not None:
        data["seeds"] = _numbers(seeds, int, "--seeds")
    if defense is not None:
        kept = [d for d in data.get("defenses", []) if not d.get("sweep")]
        if defense != "none":
            swept_phase = phase or data.get("attack", {}).get("phase", "finetune")
            kept.append({"name": defense, "phase": swept_phase, "sweep": True})
        data["defenses"] = kept
    for assignment in overrides:
        apply_override(data, assignment)
    return validate(ExperimentConfig, data)


@app.command()
def evaluate(
    method: Optional[str] = typer.Option(None, help="VFL method (vflpriv list methods); default splitnn"),
    attack: Optional[str] = typer.Option(None, help="label-inference attack(s), comma-separated, all on one training "
                                         "per (strength, seed) (vflpriv list attacks); default mc"),
    defense: Optional[str] = typer.Option(None, help="defense whose strength is swept, or 'none'"),
    dataset: Optional[str] = typer.Option(None, help="dataset (vflpriv list datasets); default digits"),
    strengths: Optional[str] = typer.Option(None, help="swept defense strengths, e.g. 1,5,25"),
    seeds: Optional[str] = typer.Option(None, help="seeds, e.g. 0,1,2"),
    phase: Optional[str] = typer.Option(None, help="phase attacked and defended: pretrain or finetune"),
    out: Path = typer.Option(Path("vflpriv-out"), help="output directory (results.csv, cap.csv, tradeoff.png)"),
    config: Optional[Path] = typer.Option(None, help="YAML or TOML experiment file"),
    set_: list[str] = typer.Option([], "--set", help="override a setting: key.path=value (repeatable)"),
    jobs: Optional[int] = typer.Option(None, help="parallel trainings (joblib workers)"),
    backend: Optional[str] = typer.Option(None, help="loky (local), threading, dask or ray"),
    address: Optional[str] = typer.Option(None, help="Dask scheduler / Ray cluster address"),
    store: Optional[Path] = typer.Option(None, help="SQLite results store (default OUT/results.sqlite)"),
    device: Optional[str] = typer.Option(None, help="torch device, e.g. cpu or cuda"),
) -> None:
    """Sweep a defense's strength x seeds for one method and attack; write results, CAP and a plot."""
    from vflpriv.experiment import evaluate_experiment

    experiment = build_experiment(
        config=config, method=method, attack=attack, defense=defense, dataset=dataset, strengths=strengths,
        seeds=seeds, phase=phase, jobs=jobs, backend=backend, device=device, overrides=set_,
    )
    failed = evaluate_experiment(experiment, out, store_path=store, address=address, console=Console())
    if failed:
        _fail(f"{failed} run(s) failed; their errors are in {out / 'results.csv'} (rerun to retry them)", code=1)


@app.command("list")
def list_(what: str = typer.Argument(..., help="methods, attacks, defenses or datasets")) -> None:
    """List registered names (built-ins and installed plugins)."""
    if what not in REGISTRIES:
        raise ConfigError(f"cannot list '{what}'; valid choices: {', '.join(REGISTRIES)}")
    for name in REGISTRIES[what].names():
        typer.echo(name)


@app.command()
def datasets() -> None:
    """Show each dataset, whether its files are present, and the command to get missing ones."""
    from rich.table import Table

    from vflpriv.data.catalog import DATASET_INFO, status

    table = Table(title="datasets (vflpriv evaluate --dataset NAME)")
    for col in ("name", "kind", "present", "description", "where / how to get"):
        table.add_column(col, overflow="fold")
    for name, info in DATASET_INFO.items():
        present, where, how = status(name)
        table.add_row(name, info.kind, "yes" if present else "no", info.description, where if present else how)
    Console().print(table)


def main() -> None:
    app()
