"""The typer app and its error handling: every bad input becomes one ``error:`` line on stderr and exit
code 2 (130 for Ctrl-C), never a traceback. Commands live in the sibling modules, one per concern."""

from __future__ import annotations

import os
import shlex
import sys
import traceback
import typing
from collections import Counter

import typer
from typer.core import TyperCommand, TyperGroup

from vflpriv.common.console import silence
from vflpriv.common.errors import ConfigError, Interrupted, VflprivError
from vflpriv.config.yaml_values import unplain
from vflpriv.store.folders import STORE_NAME
from vflpriv.store.provenance import own_version


def _flags_without_type(params: list) -> list:
    """Flags take no value: show none in ``--help`` (typer prints ``--dry-run <bool>``, ``--help <bool>``)."""
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    return params


class _Command(TyperCommand):
    def get_params(self, ctx):  # type: ignore[override]
        return _flags_without_type(super().get_params(ctx))

    def parse_args(self, ctx, args):  # type: ignore[override]
        _refuse_repeated_options(self.make_parser(ctx), list(args))
        if not set(args) & set(ctx.help_option_names):  # --help is eager: it prints the help whatever else is given
            _refuse_unplain_numbers(self.make_parser(ctx), list(args), self.callback)
        return super().parse_args(ctx, args)


def _refuse_repeated_options(parser, args: list[str]) -> None:
    """An option that takes one value, given twice (``--method splitnn --method local-a``, ``--seeds 0 --seeds 1``,
    ``--tune-attacks --no-tune-attacks``), is refused: which one counts would be a guess (click keeps the last).
    Repeatable options (``--set``) may repeat."""
    try:
        _, _, order = parser.parse_args(args=list(args))
    except Exception:  # noqa: BLE001 - click's own parse, run next, says what is wrong
        return
    given = Counter(p for p in order if getattr(p, "param_type_name", "") == "option" and not p.multiple
                    and not p.count)
    twice = [p for p, n in given.items() if n > 1]
    if twice:
        names = ", ".join("/".join(p.opts + p.secondary_opts) for p in twice)
        raise ConfigError(f"{names} given more than once; give each option once (a repeated option is not merged, "
                          "and which one counts would be a guess)")


def _refuse_unplain_numbers(parser, args: list[str], callback) -> None:
    """A number option (``--jobs``, ``--steps``, ``--low``) given as int() and pydantic read it but ``--seeds``
    refuses (``--jobs 1_0``, read as 10: ``config.yaml_values.unplain``) is refused, as a ``--set`` value is (review
    misc F10)."""
    try:
        opts, _, order = parser.parse_args(args=list(args))
        hints = typing.get_type_hints(callback)
    except Exception:  # noqa: BLE001 - click's own parse, run next, says what is wrong
        return
    for param in dict.fromkeys(order):
        kinds = {*typing.get_args(hints.get(param.name)), hints.get(param.name)} & {int, float}
        value = opts.get(param.name)
        if kinds and isinstance(value, str) and unplain(value):
            shown = ascii(value)[1:-1][:40]
            raise ConfigError(f"{'/'.join(param.opts)} expects {'an integer' if int in kinds else 'a number'}, got "
                              f"'{shown}' (ASCII digits, no '_': e.g. {2 if int in kinds else 0.5})")


class _ErrorLineGroup(TyperGroup):
    """Turns every usage or input error into one ``error:`` line and exit code 2 (130 for Ctrl-C), no traceback."""

    def get_params(self, ctx):  # type: ignore[override]
        return _flags_without_type(super().get_params(ctx))

    def invoke(self, ctx):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # before click prints a bare newline for it
            raise Interrupted("interrupted; finished runs are kept in the store") from None
        except BrokenPipeError:  # a plain echo to a reader that went away (``| head -1``): it has read enough
            silence(sys.stdout)
            return None

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # type: ignore[override]
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except typer.TyperException as exc:
            fail(exc.format_message().strip().splitlines()[-1])
        except VflprivError as exc:
            if debugging():
                traceback.print_exception(exc)  # with its cause: a plugin's own code
            fail(str(exc), code=exc.exit_code)
        except (typer.Abort, KeyboardInterrupt):
            fail("interrupted; finished runs are kept in the store", code=Interrupted.exit_code)
        code = code if isinstance(code, int) else 0
        if standalone_mode:
            sys.exit(code)
        return code


def debugging() -> bool:
    """``vflpriv --debug`` or ``VFLPRIV_DEBUG=1``: errors come with their traceback (a failing plugin's, say)."""
    return os.environ.get("VFLPRIV_DEBUG", "") not in ("", "0")


def command_line() -> str:
    """The command as typed (``vflpriv`` and its arguments, shell-quoted), for reports that say how they were made."""
    return " ".join(["vflpriv", *map(shlex.quote, sys.argv[1:])])


def fail(message: str, *, code: int = 2) -> None:
    """One ``error:`` line: control characters a user typed into a name (a newline, a tab) are shown escaped."""
    sys.stderr.write(f"error: {one_line(message)}\n")
    sys.exit(code)


def one_line(text: str) -> str:
    """``text`` with every control character escaped (``\\n``, ``\\x1b``), so it prints as one line."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


class _App(typer.Typer):
    """The app; its commands use :class:`_Command` (flags shown without a type)."""

    def command(self, *args, cls=None, **kwargs):  # type: ignore[override]
        return super().command(*args, cls=cls or _Command, **kwargs)


app = _App(cls=_ErrorLineGroup, add_completion=False, pretty_exceptions_enable=False,
           help="Measure label leakage of VFL methods and the cost of defenses.")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"vflpriv {own_version()}")
        raise typer.Exit()


@app.callback(invoke_without_command=True)
def _root(ctx: typer.Context, version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                                           help="Print vflpriv's version and exit."),
          debug: bool = typer.Option(False, "--debug", help="errors come with their traceback (or VFLPRIV_DEBUG=1)")
          ) -> None:
    if debug:
        os.environ["VFLPRIV_DEBUG"] = "1"
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())


#: ``--store`` of every command that trains into a store of the user's choice (``reproduce`` keeps OUT's).
STORE_PATH = typer.Option(None, "--store", help=f"SQLite results store (default OUT/{STORE_NAME})")
#: ``--quiet`` of every command that trains: no progress on stderr (results and errors are still printed).
QUIET = typer.Option(False, "--quiet", help="no progress lines (runs done, time left) on stderr")
DRY_RUN = typer.Option(False, "--dry-run", help="check every setting and print the planned runs and trainings; "
                       "train nothing, write nothing")
