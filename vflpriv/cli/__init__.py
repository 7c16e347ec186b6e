"""The ``vflpriv`` command line (typer): the app and one module per group of commands.

May import: every other package of vflpriv.
"""

import os
import signal
import sys

from vflpriv.cli import audit, catalog, evaluate, reproduce, results, tune  # noqa: F401 - registers the commands
from vflpriv.cli.app import app
from vflpriv.common.console import silence, tolerate_narrow_encodings


def main() -> None:
    """Run the app, then leave at once. By then every file and the store are written and closed; what
    remains is the interpreter's teardown of torch and friends (about a second) and, for a parallel
    command, the graceful join of its workers, which are killed instead."""
    tolerate_narrow_encodings()
    signal.signal(signal.SIGTERM, _as_ctrl_c)
    try:
        app()
        code = 0
    except SystemExit as exc:
        if isinstance(exc.code, str):
            sys.stderr.write(exc.code + "\n")
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except BrokenPipeError:  # a plain print to a reader that went away: nothing more to say to it
        silence(sys.stdout)
        code = 0
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the work is over: a late SIGTERM just ends the process
    executors = sys.modules.get("vflpriv.tradeoff.executors")  # imported only by commands that train
    if executors is not None:
        executors.stop_workers()
        # What the interpreter's exit would do for loky's semaphores (its pool's queues, and those an
        # interrupted sweep left in reference cycles): unlink them and tell the resource tracker, which
        # otherwise warns of "leaked semlock objects".
        from multiprocessing import util

        util._run_finalizers(0)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            pass
    os._exit(code)


def _as_ctrl_c(signum, frame) -> None:
    """SIGTERM (``kill``, a scheduler's stop) ends a command as Ctrl-C does: workers stopped, the finished runs kept
    in the store, one line saying where, exit code 130."""
    raise KeyboardInterrupt


__all__ = ["app", "main"]
