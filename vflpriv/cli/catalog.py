"""``vflpriv list`` and ``vflpriv datasets``: what is registered and what data is here."""

from __future__ import annotations

import typer

from vflpriv.cli.app import app
from vflpriv.common.console import make_console
from vflpriv.common.errors import ConfigError
from vflpriv.config import presets
from vflpriv.config.registry import REGISTRIES


@app.command("list")
def list_(what: str = typer.Argument(..., metavar="WHAT",
                                     help="methods, attacks, defenses, datasets, auditors or presets")) -> None:
    """List registered names (built-ins and installed plugins), or the shipped presets with what they are."""
    if what == "presets":
        for name in presets.names():
            typer.echo(f"{name}: {presets.description(name)}")
        return
    if what not in REGISTRIES:
        raise ConfigError(f"cannot list '{what}'; valid choices: {', '.join([*REGISTRIES, 'presets'])}")
    from vflpriv.workflows.describe import one_line

    names = REGISTRIES[what].names()
    width = max(map(len, names), default=0)
    for name in names:
        typer.echo(f"{name:<{width}}  {one_line(what.removesuffix('s'), name)}")


@app.command()
def datasets() -> None:
    """Show each dataset, whether its files are present, and the command to get missing ones."""
    from rich.markup import escape
    from rich.table import Table

    from vflpriv.data.catalog import DATASET_INFO, status

    table = Table(title="datasets (vflpriv evaluate --dataset NAME)")
    for col in ("name", "kind", "present", "description", "where / how to get"):
        table.add_column(col, overflow="fold")
    for name, info in DATASET_INFO.items():
        present, where, how = status(name)
        table.add_row(*map(escape, (name, info.kind, "yes" if present else "no", info.description,
                                    where if present else how)))
    make_console().print(table)


@app.command()
def describe(name: str = typer.Argument(..., metavar="NAME",
                                        help="a method, attack, defense, dataset, auditor or preset name")) -> None:
    """Show what a component does and its options: type, default and description."""
    from rich.markup import escape
    from rich.table import Table

    from vflpriv.workflows.describe import describe as describe_name

    console = make_console()
    for d in describe_name(name):
        console.print(f"[bold]{escape(d.kind)} {escape(d.name)}[/bold]: {escape(d.summary)}")  # text, not markup
        for key, value in d.facts.items():
            console.print(escape(f"  {key}: {value}"))
        if d.options:
            table = Table(title=escape(f"options ({d.prefix}NAME=VALUE)"), title_justify="left")
            for col in ("option", "type", "default", "description"):
                table.add_column(col, overflow="fold")
            for row in d.options:
                table.add_row(*map(escape, row))
            console.print(table)
        elif d.kind not in ("dataset", "preset"):
            console.print("  options: none")
