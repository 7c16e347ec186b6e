"""Where trainings execute: in this process, in local loky workers, or on Dask or Ray clusters (joblib backends).

Each training uses one torch thread (``vflpriv.runner.execution.execute``), so a sweep scales by processes, not by
oversubscribed threads, and gives the same numbers whatever the number of jobs.

Locally, ``jobs`` trainings run at once: this process computes one share itself and ``jobs - 1`` loky
workers (joblib's process pool, used directly: joblib runs a one-worker pool in the calling process)
compute the rest, taking items from one queue. A worker costs seconds to start (a new interpreter
importing torch), so :func:`prewarm` spawns the workers before this process has even planned, and they
warm up while it does. Results are handed to ``on_result`` as soon as each
exists, from whichever thread has it, so a finished training is never held back. Workers watch their
parent: if it dies (``kill -9``) they exit within a second instead of holding their memory.
"""

from __future__ import annotations

import collections
import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import joblib

from vflpriv.common.errors import ConfigError

LOCAL_BACKENDS = ("loky", "threading")
BACKENDS = (*LOCAL_BACKENDS, "dask", "ray")
#: Seconds a cluster at ``--address`` has to answer before a sweep refuses it (nothing is written before).
CLUSTER_TIMEOUT = 20.0
#: Seconds between a worker's checks that its parent is alive.
WATCH_INTERVAL = 0.5
_NOTHING = object()


def _exit_with_parent(parent: int) -> None:
    """Loky worker initializer: leave Ctrl-C and SIGTERM to the parent (a terminal, or ``kill`` of the process
    group, sends them to every process; the parent then stops the workers), one torch thread, and exit as soon as
    ``parent`` is no longer the parent. Loky's leak check is off: a worker keeps its freed tensor buffers (``vflpriv.models.allocator``) and its
    in-process caches on purpose, so its resident memory stays at its peak; loky read that as a leak of more
    than 300 MB after a full-data CNN training and restarted the worker, with a warning and a fresh import."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # as Ctrl-C: the parent stops them (SIGKILL), or they follow it
    import torch
    from joblib.externals.loky import process_executor

    process_executor._MAX_MEMORY_LEAK_SIZE = 1 << 62

    torch.set_num_threads(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WATCH_INTERVAL)
        os._exit(1)

    threading.Thread(target=watch, name="vflpriv-parent-watch", daemon=True).start()


def _warm_up() -> None:
    """Import what every training needs (vflpriv's runtime) before the first training arrives."""
    import vflpriv.runner.execution  # noqa: F401


@contextlib.contextmanager
def _threading(*, address: str | None, jobs: int, gpu_share: float | None) -> Iterator[int]:
    """Threads of this process (for tests and debugging: trainings hold the GIL for their Python parts)."""
    with joblib.parallel_config(backend="threading"):
        yield jobs


@contextlib.contextmanager
def _dask(*, address: str | None, jobs: int, gpu_share: float | None) -> Iterator[int]:
    """A Dask cluster at ``address``, or a local one of ``jobs`` single-threaded worker processes. With a
    ``gpu_share``, each run asks for that much of the workers' ``GPU`` resource (Dask's resources are counters its
    scheduler honours: start one worker per GPU, ``CUDA_VISIBLE_DEVICES=i dask worker ADDRESS --resources GPU=1``);
    the local cluster gives each of its workers one."""
    try:
        from dask.distributed import Client
    except ImportError:
        raise ConfigError("backend 'dask' needs the dask extra: pip install 'vflpriv[dask]'") from None
    local = {"n_workers": jobs, "processes": True, "threads_per_worker": 1,
             **({"resources": {"GPU": 1}} if gpu_share else {})}
    with Client(address) if address else Client(**local) as client:
        if gpu_share and not any(w.get("resources", {}).get("GPU") for w in client.scheduler_info()["workers"].values()):
            raise ConfigError("the Dask cluster's workers declare no GPU resource, so runs on CUDA would wait forever; "
                              "start them with --resources GPU=1 (one worker per GPU, CUDA_VISIBLE_DEVICES=i)")
        with joblib.parallel_config(backend="dask", **({"resources": {"GPU": gpu_share}} if gpu_share else {})):
            yield jobs


@contextlib.contextmanager
def _ray(*, address: str | None, jobs: int, gpu_share: float | None) -> Iterator[int]:
    """A Ray cluster at ``address`` (``auto``, ``ray://host:port``), or a local instance of ``jobs`` CPUs;
    a Ray instance this process already runs is used and left running. With a ``gpu_share``, each of the pool's
    workers asks Ray for that share of a GPU (``num_gpus``): Ray places it and sets its ``CUDA_VISIBLE_DEVICES``, so
    its ``cuda`` is its own GPU, and no more workers run than the cluster's GPUs hold (more would wait forever
    for resources the others keep)."""
    try:
        import ray
        from ray.util.joblib import register_ray
    except ImportError:
        raise ConfigError("backend 'ray' needs the ray extra: pip install 'vflpriv[ray]'") from None
    register_ray()
    started = not ray.is_initialized()
    if started:
        ray.init(address=address, num_cpus=None if address else jobs, include_dashboard=False,
                 log_to_driver=False, logging_level="ERROR")
    try:
        if gpu_share:
            fits = int(ray.cluster_resources().get("GPU", 0) / gpu_share + 1e-9)
            if fits == 0:
                raise ConfigError("the Ray cluster has no GPU for runs on CUDA; start it with GPUs, or use --device cpu")
            jobs = min(jobs, fits)
        with joblib.parallel_config(backend="ray", **({"ray_remote_args": {"num_gpus": gpu_share}} if gpu_share else {})):
            yield jobs
    finally:
        if started:
            ray.shutdown()


def check_cluster(backend_name: str, address: str | None, *, timeout: float | None = None) -> None:
    """Refuse, as one ConfigError within ``timeout`` seconds (default :data:`CLUSTER_TIMEOUT`), a cluster at
    ``address`` that does not answer as a ``backend_name`` cluster: called while planning, before a store is
    created, so a cluster that cannot be reached leaves nothing behind. No address (a local cluster): nothing to
    check. A dask or ray backend whose extra is not installed is refused first, address or not."""
    if backend_name in _NEEDS and importlib.util.find_spec(_NEEDS[backend_name]) is None:
        raise ConfigError(f"backend '{backend_name}' needs the {backend_name} extra: "
                          f"pip install 'vflpriv[{backend_name}]'")
    if address is None:
        return
    timeout = CLUSTER_TIMEOUT if timeout is None else timeout
    if backend_name not in _PROBE_SCRIPTS:
        raise ConfigError(f"--address is for a dask or ray cluster; backend '{backend_name}' runs locally")
    deadline = time.monotonic() + timeout
    try:
        _answers(address, timeout=timeout)
        _probe(backend_name, address, timeout=max(deadline - time.monotonic(), 0.1))
    except ConfigError:
        raise
    except Exception as exc:  # whatever the connection raised (a timeout, a refusal, a bad address, garbage)
        reason = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, TimeoutError) and "time" not in reason.lower():
            reason = "no answer"
        raise ConfigError(f"cannot reach a {backend_name} cluster at --address {address!r} within {timeout:g} s: "
                          f"{reason[:300]}") from None


def _answers(address: str, *, timeout: float) -> None:
    """Fail fast where nothing listens (a refused connection is immediate; the clients retry until their
    timeout): open and close a TCP connection to ``host:port`` when the address names one."""
    host, sep, port = address.split("://")[-1].rpartition(":")
    if sep and host and port.isdigit():
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass


#: The module each cluster backend's extra installs (dask's client lives in ``distributed``).
_NEEDS = {"dask": "distributed", "ray": "ray"}

#: What a child process runs to connect to a cluster (argv[1]: the address) and leave it as it was.
_PROBE_SCRIPTS = {
    "dask": "import sys\nfrom dask.distributed import Client\nClient(sys.argv[1], timeout=float(sys.argv[2])).close()",
    "ray": "import sys, ray\nray.init(address=sys.argv[1], include_dashboard=False, log_to_driver=False, "
           "logging_level='ERROR')\nray.shutdown()",
}


def _probe(backend_name: str, address: str, *, timeout: float) -> None:
    """Connect to the cluster from a child process, killed (with whatever it started) at ``timeout``: neither
    client keeps its own timeout where an address accepts a connection and never answers (Dask's handshake
    and ``ray.init`` both wait forever), and no Python-level timeout reaches a blocked connect."""
    with tempfile.TemporaryFile(mode="w+") as log:  # not a pipe: a grandchild holding it open would block us
        child = subprocess.Popen([sys.executable, "-c", _PROBE_SCRIPTS[backend_name], address, str(timeout)],
                                 stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
        try:
            code = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError from None
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        if code != 0:
            log.seek(0)
            lines = [line for line in log.read().splitlines() if line.strip()]
            raise ConnectionError(lines[-1] if lines else f"exit code {code}")


#: joblib backends other than loky (which :func:`run_all` drives directly), by name.
_BACKENDS: dict[str, Callable[..., contextlib.AbstractContextManager]] = {
    "threading": _threading, "dask": _dask, "ray": _ray}


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


_POOL: list[Any] = []


#: The warnings loky's resource tracker prints at exit about semaphores it then cleans up itself.
QUIET_TRACKER = "ignore:resource_tracker:UserWarning"


def _quiet_resource_tracker() -> None:
    """Keep loky's resource tracker (a process spawned with this environment) from printing "leaked semlock
    objects to clean up at shutdown" after a refused command stopped its pre-started workers: the tracker removes
    them itself, and the user would read them as a second error line. Other warnings still print."""
    current = os.environ.get("PYTHONWARNINGS", "")
    if QUIET_TRACKER not in current.split(","):
        os.environ["PYTHONWARNINGS"] = ",".join(filter(None, [current, QUIET_TRACKER]))


def _executor(workers: int):
    """loky's reusable process pool (the engine under joblib's loky backend) with vflpriv's worker setup;
    the same arguments give back the same pool, so :func:`prewarm`'s workers serve the sweep."""
    from joblib.externals.loky import get_reusable_executor

    _quiet_resource_tracker()  # before the pool starts the tracker

    pool = get_reusable_executor(max_workers=workers, timeout=300, initializer=_exit_with_parent,
                                 initargs=(os.getpid(),), env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
    _POOL[:] = [pool]
    return pool


def stop_workers() -> None:
    """Kill this process's local workers, if it started any. The command line calls it when a command ends:
    the pool's graceful shutdown at interpreter exit waits for every worker to unload torch (about a second)."""
    for pool in _POOL:
        pool.shutdown(wait=True, kill_workers=True)  # waits only for loky to release its queues
    _POOL.clear()


def _dispatched(futures: list[Future], *, timeout: float = 10.0) -> None:
    """Wait (milliseconds) until loky's manager thread has handed ``futures`` to the workers: a pool killed
    while an item is still in its id queue crashes that thread (KeyError) before it releases its queues,
    which then show up as "leaked semlock objects" warnings. The wait ends at dispatch (milliseconds); the 10 s bound
    is for a loaded machine (at 2 s, a CI run beside another audit leaked one)."""
    deadline = time.monotonic() + timeout
    while any(not (f.running() or f.done()) for f in futures) and time.monotonic() < deadline:
        time.sleep(0.002)


class Warm:
    """Local workers spawned ahead of a sweep (see :func:`prewarm`); ``cancel`` stops them if it never runs."""

    def __init__(self, warm_ups: list[Future] | None = None):
        self.warm_ups = warm_ups or []  # one import task per spawned worker

    def cancel(self) -> None:
        if self.warm_ups:
            _dispatched(self.warm_ups)
            stop_workers()
            self.warm_ups = []


def prewarm(*, jobs: int, backend_name: str, previous: Warm | None = None) -> Warm:
    """Spawn the ``jobs - 1`` local workers of a coming sweep now and let them import while this process
    plans; the sweep reuses them. Nothing to do for other backends or one job. ``previous`` (workers
    spawned on an earlier guess of ``jobs``) is reused, resized, or stopped when no worker is needed."""
    if backend_name != "loky" or jobs < 2:
        if previous is not None:
            previous.cancel()
        return Warm()
    with _workers_ignore_ctrl_c():  # spawned here: the workers inherit SIGINT ignored
        executor = _executor(jobs - 1)  # the same pool as ``previous``'s, resized if need be
        return Warm([executor.submit(_warm_up) for _ in range(jobs - 1)])


def run_all(
    fn: Callable[[Any], Any], items: list[Any], *, jobs: int, on_result: Callable[[Any], None],
    backend_name: str = "loky", address: str | None = None, gpu_share: float | None = None,
    on_start: Callable[[Any], None] | None = None, on_tail: Callable[[], None] | None = None,
) -> None:
    """Compute ``fn(item)`` for every item, handing each result to ``on_result`` as soon as it exists (on
    Ray, whose joblib backend has no result generator: as soon as its wave of ``jobs`` items ends). On a Dask or
    Ray cluster, ``gpu_share`` is the share of a GPU each item asks the scheduler for (items that run on CUDA).
    ``on_start(item)``: locally, when an item starts (a cluster's scheduler decides that: not called there).
    ``on_tail()``: locally with workers, once, in this process, as soon as no more items wait than workers compute
    (each can take one when done): the caller's next work (a report's imports) then overlaps the workers' last items;
    an item still waiting after it this process takes, as it would have before doing that work."""
    started = on_start or (lambda item: None)
    if jobs == 1 and backend_name in LOCAL_BACKENDS:
        for item in items:
            started(item)
            on_result(fn(item))
        return
    if backend_name == "loky":
        _share_with_workers(fn, items, workers=jobs - 1, on_result=on_result, on_start=started,
                            on_tail=on_tail or (lambda: None))
        return
    if backend_name not in _BACKENDS:
        raise ConfigError(f"unknown backend '{backend_name}'; valid backends: {', '.join(BACKENDS)}")
    with _BACKENDS[backend_name](address=address, jobs=jobs, gpu_share=gpu_share) as jobs, warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*tasks which were still being processed", category=UserWarning)
        active, _ = joblib.parallel.get_active_backend()
        if active.supports_return_generator:
            for result in joblib.Parallel(n_jobs=jobs, return_as="generator_unordered")(
                    joblib.delayed(fn)(item) for item in items):
                on_result(result)
            return
        with joblib.Parallel(n_jobs=jobs) as parallel:  # Ray's backend returns lists: waves on one pool
            for start in range(0, len(items), jobs):
                for result in parallel(joblib.delayed(fn)(item) for item in items[start:start + jobs]):
                    on_result(result)


def _share_with_workers(fn: Callable[[Any], Any], items: list[Any], *, workers: int, on_result,
                        on_start: Callable[[Any], None], on_tail: Callable[[], None]) -> None:
    """This process and ``workers`` loky workers take items from one queue until none is left; each worker
    gets its next item from the callback that delivers its last result, before that result is handed on (a store's
    commit waits for the disk; the worker need not). Once no more items wait than workers compute, ``on_tail()`` runs
    here, then this process takes what is left; it returns once every result was handed on (review hunt3 P5)."""
    todo = collections.deque(items)
    lock = threading.Lock()
    settled = threading.Condition(lock)  # notified as a worker's result has been handed on (or failed)
    pending: set[Future] = set()  # computing in a worker
    handing: set[Future] = set()  # computed, its result being handed on
    failures: list[BaseException] = []

    def take() -> Any:
        with lock:
            item = todo.popleft() if todo and not failures else _NOTHING
        if item is not _NOTHING:
            on_start(item)
        return item

    def submit() -> None:
        item = take()
        if item is not _NOTHING:
            future = executor.submit(fn, item)
            with lock:
                pending.add(future)
            future.add_done_callback(finished)

    def finished(future: Future) -> None:  # in loky's result thread
        with lock:
            pending.discard(future)
            handing.add(future)
        try:
            result = future.result()
            submit()  # the worker's next item first: it computes while this thread commits the last result
            on_result(result)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which raises it
            failures.append(exc)
        finally:
            with lock:
                handing.discard(future)
                settled.notify_all()

    with _workers_ignore_ctrl_c():
        executor = _executor(workers)
        for _ in range(workers):
            submit()
    try:
        tail = False
        while not failures:
            with lock:
                near_end = not tail and bool(pending) and len(todo) <= len(pending)
            if near_end:
                tail = True
                on_tail()
            if (item := take()) is _NOTHING:
                break
            on_result(fn(item))
        with lock:
            while (pending or handing) and not failures:
                settled.wait(timeout=0.2)  # a short wait, so Ctrl-C is seen at once
        if failures:
            raise failures[0]
    except BaseException:
        with lock:
            todo.clear()
        stop_workers()
        raise
