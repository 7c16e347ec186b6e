"""Where trainings execute: in process, or through joblib (loky locally; Dask or Ray clusters via joblib backends).

Each training uses one torch thread (``vflpriv.run.execute``), so a sweep scales by processes, not by
oversubscribed threads, and gives the same numbers whatever the number of jobs. Local loky workers
watch their parent: if the sweeping process dies (``kill -9``), they exit within a second instead of
holding their memory until loky's idle timeout.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import joblib

from vflpriv.errors import ConfigError

LOCAL_BACKENDS = ("loky", "threading")
BACKENDS = (*LOCAL_BACKENDS, "dask", "ray")
#: Seconds between a worker's checks that its parent is alive.
WATCH_INTERVAL = 0.5


def _exit_with_parent(parent: int) -> None:
    """Loky worker initializer: leave Ctrl-C to the parent (a terminal sends it to the whole process group;
    the parent then stops the workers), one torch thread, and exit as soon as ``parent`` is no longer the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import torch

    torch.set_num_threads(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WATCH_INTERVAL)
        os._exit(1)

    threading.Thread(target=watch, name="vflpriv-parent-watch", daemon=True).start()


@contextlib.contextmanager
def backend(name: str, *, address: str | None = None) -> Iterator[None]:
    """Activate a joblib backend; ``dask``/``ray`` connect to ``address`` or start a local cluster."""
    if name == "loky":
        with joblib.parallel_config(backend="loky", inner_max_num_threads=1,
                                    initializer=_exit_with_parent, initargs=(os.getpid(),)):
            yield
        return
    if name == "threading":
        with joblib.parallel_config(backend="threading"):
            yield
        return
    if name == "dask":
        try:
            from dask.distributed import Client
        except ImportError:
            raise ConfigError("backend 'dask' needs the dask extra: pip install 'vflpriv[dask]'") from None
        with Client(address) if address else Client(processes=True):
            with joblib.parallel_config(backend="dask"):
                yield
        return
    if name == "ray":
        try:
            import ray
            from ray.util.joblib import register_ray
        except ImportError:
            raise ConfigError("backend 'ray' needs the ray extra: pip install 'vflpriv[ray]'") from None
        register_ray()
        ray.init(address=address, ignore_reinit_error=True)
        try:
            with joblib.parallel_config(backend="ray"):
                yield
        finally:
            ray.shutdown()
        return
    raise ConfigError(f"unknown backend '{name}'; valid backends: {', '.join(BACKENDS)}")


@contextlib.contextmanager
def _workers_ignore_ctrl_c() -> Iterator[None]:
    """Ignore SIGINT while workers are spawned: an ignored signal stays ignored across fork and exec, and
    Python keeps it so, so a terminal's Ctrl-C (sent to the whole process group) reaches only the parent,
    which then stops the workers; without this, workers still importing print tracebacks. The parent
    ignores it only for the dispatch itself (milliseconds)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def map_unordered(
    fn: Callable[[Any], Any], items: list[Any], *, jobs: int, backend_name: str = "loky", address: str | None = None
) -> Iterator[Any]:
    """Yield ``fn(item)`` for each item as results arrive; ``jobs == 1`` runs locally in this process."""
    if jobs == 1 and backend_name in LOCAL_BACKENDS:
        for item in items:
            yield fn(item)
        return
    with backend(backend_name, address=address), warnings.catch_warnings():
        # an interrupted sweep cancels its pending tasks on purpose; joblib would warn about it on stderr
        warnings.filterwarnings("ignore", message=r".*tasks which were still being processed", category=UserWarning)
        parallel = joblib.Parallel(n_jobs=jobs, return_as="generator_unordered")
        with _workers_ignore_ctrl_c():  # joblib spawns the workers and dispatches the first tasks here
            results = parallel(joblib.delayed(fn)(item) for item in items)
        yield from results
