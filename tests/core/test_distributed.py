"""The same sweep on a Dask cluster and on Ray (joblib backends) gives the numbers of the local run.

Each test starts its own local cluster; it is skipped, with the install command, when the extra is absent.
"""

from __future__ import annotations

import importlib

import pytest

from vflpriv.config.schema import ExperimentConfig
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
