"""The command line's rich consoles: the terminal's width on a terminal, no wrapping when piped."""

from __future__ import annotations

from rich.console import Console

#: Width of a console that is not a terminal: wide enough that rich never wraps a line or a table cell.
UNWRAPPED = 4096


def make_console(*, stderr: bool = False, quiet: bool = False) -> Console:
    """A console for output. Piped or redirected, rich would wrap at 80 columns, inside words
    ("scripts/get-dat asets.sh"); there lines and table cells keep their whole width instead."""
    console = Console(stderr=stderr, quiet=quiet)
    if console.is_terminal:
        return console
    return Console(stderr=stderr, quiet=quiet, width=UNWRAPPED, soft_wrap=True)
