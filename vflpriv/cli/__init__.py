"""The ``vflpriv`` command line (typer): the app and one module per group of commands."""

from vflpriv.cli import audit, catalog, evaluate, results, tune  # noqa: F401 - registers the commands
from vflpriv.cli.app import app


def main() -> None:
    app()


__all__ = ["app", "main"]
