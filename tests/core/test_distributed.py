"""The same sweep on a Dask cluster and on Ray (joblib backends) gives the numbers of the local run.

Each test starts its own local cluster; it is skipped, with the install command, when the extra is absent.
"""

from __future__ import annotations

import importlib

import pytest

from vflpriv.config.sweep import ExperimentConfig
from vflpriv.store.sqlite import Store
from vflpriv.tradeoff.executors import check_cluster
from vflpriv.tradeoff.sweep import sweep


def _need(module: str, extra: str) -> None:
    try:
        importlib.import_module(module)
    except ImportError:
        pytest.skip(f"needs the {extra} extra: pip install -c constraints.txt -e '.[{extra}]'")


def _runs():
    """Two methods (one pretrains, through the cache of whichever worker runs it) x 2 strengths x 2 seeds."""
    return [run for method in ("splitnn", "local-simsiam") for run in ExperimentConfig.model_validate({
        "method": {"name": method, "options": {"epochs": 1} if method != "splitnn" else {}},
        "partition": {"labeled": 60, "aux": 20}, "model": {"hidden": 32, "out_dim": 16},
        "finetune": {"epochs": 2}, "attack": {"name": ["mc", "gc"], "options": {"mc": {"epochs": 5}},
                                              "prior": "aux", "prior_epochs": 5},
        "strengths": [0, 5], "seeds": [0, 1],
    }).runs()]


def _numbers(frame) -> list[tuple]:
    assert set(frame["status"]) == {"ok"}, frame["error"].tolist()
    cols = ["key", "utility", "attack_accuracy", "prior_accuracy", "comm_mb"]
    return sorted(map(tuple, frame[cols].itertuples(index=False)))


@pytest.fixture(scope="module")
def local_numbers(tmp_path_factory) -> list[tuple]:
    with Store(tmp_path_factory.mktemp("local") / "r.sqlite") as store:
        return _numbers(sweep(_runs(), store, jobs=1))


def test_dask_cluster_gives_the_local_numbers(tmp_path, local_numbers) -> None:
    _need("dask.distributed", "dask")
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        check_cluster("dask", cluster.scheduler_address, timeout=30)  # a live scheduler passes the probe
        with Store(tmp_path / "r.sqlite") as store:
            frame = sweep(_runs(), store, jobs=2, backend="dask", address=cluster.scheduler_address)
    assert _numbers(frame) == local_numbers


def test_ray_gives_the_local_numbers(tmp_path, local_numbers) -> None:
    _need("ray", "ray")
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with Store(tmp_path / "r.sqlite") as store:
            frame = sweep(_runs(), store, jobs=2, backend="ray")
        assert ray.is_initialized()  # the test's instance: the sweep did not shut it down
    finally:
        ray.shutdown()
    assert _numbers(frame) == local_numbers


def test_ray_schedules_at_most_the_declared_gpu_share_and_hands_each_run_its_gpu() -> None:
    """A local Ray with two logical GPUs and 2 runs per GPU: 8 runs asked for with --jobs 8 run at most 4 at a time,
    each on one GPU that Ray assigned and made its only visible one (so its ``cuda`` is that GPU)."""
    _need("ray", "ray")
    import ray

    from vflpriv.tradeoff.executors import run_all

    def placement(_item) -> tuple:  # a local function: Ray's workers get it by value, not by an import of this file
        import os
        import time

        import ray

        start = time.time()
        time.sleep(0.4)
        return os.environ.get("CUDA_VISIBLE_DEVICES"), tuple(ray.get_gpu_ids()), start, time.time()

    ray.init(num_cpus=8, num_gpus=2, include_dashboard=False, log_to_driver=False)
    try:
        seen = []
        run_all(placement, list(range(8)), jobs=8, on_result=seen.append, backend_name="ray", gpu_share=0.5)
    finally:
        ray.shutdown()
    assert len(seen) == 8
    for visible, ids, _, _ in seen:
        assert len(ids) == 1 and str(ids[0]) in ("0", "1") and visible == str(ids[0])
    moments = sorted(t for _, _, start, end in seen for t in (start, end))
    busy = max(sum(start <= t < end for _, _, start, end in seen) for t in moments)
    assert busy <= 4


def test_a_dask_cluster_without_gpu_resources_is_refused_for_runs_on_cuda() -> None:
    _need("dask.distributed", "dask")
    from dask.distributed import LocalCluster

    from vflpriv.common.errors import ConfigError
    from vflpriv.tradeoff.executors import run_all

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        with pytest.raises(ConfigError, match="declare no GPU resource"):
            run_all(str, [1], jobs=1, on_result=print, backend_name="dask", address=cluster.scheduler_address,
                    gpu_share=0.25)


def test_a_local_sweep_spreads_trainings_round_robin_over_the_visible_gpus() -> None:
    from vflpriv.config.schema import RunConfig
    from vflpriv.tradeoff.sweep import gpu_share, on_gpus

    cuda, fixed, cpu = (RunConfig.model_validate({"device": d, "seed": s}) for d, s in (("cuda", 0), ("cuda:1", 1),
                                                                                         ("cpu", 2)))
    groups = [[cuda], [cuda, cuda], [fixed], [cpu], [cuda]]
    placed = on_gpus(groups, 2)
    assert [[r.device for r in g] for g in placed] == [["cuda:0"], ["cuda:1", "cuda:1"], ["cuda:1"], ["cpu"],
                                                       ["cuda:0"]]
    assert [r.key() for g in placed for r in g] == [r.key() for g in groups for r in g]  # the device is no key part
    assert on_gpus(groups, 1) == groups
    assert gpu_share([cuda], backend="ray", runs_per_gpu=4) == 0.25
    assert gpu_share([cuda], backend="loky", runs_per_gpu=4) is None and gpu_share([cpu], backend="dask",
                                                                                    runs_per_gpu=4) is None
