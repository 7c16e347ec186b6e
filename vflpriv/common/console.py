"""The command line's rich consoles: the terminal's width on a terminal, no wrapping when piped."""

from __future__ import annotations

import codecs
import os
import sys

from rich.console import Console

def plural(n: int, noun: str) -> str:
    """``n`` and ``noun``, in the plural unless ``n`` is 1 ("1 seed", "3 seeds")."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


#: Width of a console that is not a terminal: wide enough that rich never wraps a line or a table cell.
UNWRAPPED = 4096


class _Console(Console):
    """A console whose reader may go away (``vflpriv sweep ... | head -1``): from then on it prints nothing, and the
    command goes on to write its files and store (rich would exit at once, mid-sweep, with code 1 and no word)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        silence(self.file)


def silence(stream) -> None:
    """Point the file descriptor behind ``stream`` (a closed pipe) at /dev/null, so that later writes, the
    interpreter's last flush included, go nowhere instead of raising BrokenPipeError."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def make_console(*, stderr: bool = False, quiet: bool = False) -> Console:
    """A console for output. Piped or redirected, rich would wrap at 80 columns, inside words
    ("scripts/get-dat asets.sh"); there lines and table cells keep their whole width instead. A closed pipe
    silences it (:class:`_Console`)."""
    console = _Console(stderr=stderr, quiet=quiet)
    if console.is_terminal:
        return console
    return _Console(stderr=stderr, quiet=quiet, width=UNWRAPPED, soft_wrap=True)


#: ASCII spellings of the symbols vflpriv prints, for a stream whose encoding lacks them (others become "?").
ASCII_SPELLINGS = {"±": "+/-", "λ": "lambda", "ε": "eps", "δ": "delta", "σ": "sigma", "γ": "gamma", "—": "-",
                   "–": "-", "−": "-", "…": "...", "≥": ">=", "≤": "<=", "≈": "~", "×": "x", "→": "->", "✓": "ok",
                   "✗": "x", "·": "*", "²": "^2", "‰": " per mille", "“": '"', "”": '"', "’": "'"}


def _spell_in_ascii(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    text = error.object[error.start:error.end]
    return "".join(ASCII_SPELLINGS.get(ch, "?") for ch in text), error.end


codecs.register_error("vflpriv-ascii", _spell_in_ascii)


def tolerate_narrow_encodings() -> None:
    """Let stdout and stderr write what their encoding lacks (``PYTHONIOENCODING=ascii``, a latin-1 terminal) in
    ASCII instead of failing with a traceback after the work is done."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            try:
                "±λ—".encode(stream.encoding or "ascii")
            except (UnicodeEncodeError, LookupError):
                stream.reconfigure(errors="vflpriv-ascii")
