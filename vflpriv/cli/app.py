"""The typer app and its error handling: every bad input becomes one ``error:`` line on stderr and exit
code 2 (130 for Ctrl-C), never a traceback. Commands live in the sibling modules, one per concern."""

from __future__ import annotations

import sys

import typer
from typer.core import TyperGroup

from vflpriv.errors import Interrupted, VflprivError


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
            fail(exc.format_message().strip().splitlines()[-1])
        except VflprivError as exc:
            fail(str(exc), code=exc.exit_code)
        except (typer.Abort, KeyboardInterrupt):
            fail("interrupted; finished runs are kept in the store", code=Interrupted.exit_code)
        code = code if isinstance(code, int) else 0
        if standalone_mode:
            sys.exit(code)
        return code


def fail(message: str, *, code: int = 2) -> None:
    sys.stderr.write(f"error: {message}\n")
    sys.exit(code)


app = typer.Typer(cls=_ErrorLineGroup, add_completion=False, pretty_exceptions_enable=False,
                  help="Measure label leakage of VFL methods and the cost of defenses.")


@app.callback(invoke_without_command=True)
def _root(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
