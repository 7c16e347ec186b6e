"""Devices: every random draw is made by a CPU generator and moved (so a seed draws the same on every device), and
every method, attack and defense runs on the test device (CUDA where present, else the CPU; ``VFLPRIV_TEST_DEVICE``
picks one) and gives numbers, not just a status: the same config twice gives the same record, a defense at its
identity the undefended one. Where CUDA is present, the CPU and CUDA runs of one config start from the same partition,
initial weights and batches, and end within a stated tolerance.
"""

from __future__ import annotations

import ast
import math
import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("vflpriv", "attacks", "defenses", "auditors", "tradeoff", "reports")
#: torch functions that draw from a generator and create their output (the device must be named).
DRAWS = {"rand", "randn", "randint", "randperm", "normal", "bernoulli", "poisson"}
#: In-place fills from a generator on a tensor's own device: only where the draw is routed to the generator's device.
IN_PLACE = {"uniform_", "normal_", "kaiming_uniform_", "kaiming_normal_", "xavier_uniform_", "xavier_normal_",
            "exponential_", "random_", "geometric_", "multinomial"}
ROUTED = {("vflpriv/models/encoders.py", "init_parameters"), ("vflpriv/models/kmeans.py", "_seed")}


def _calls(path: Path):
    """(innermost enclosing function, call, its keywords) of every call passing a generator."""
    tree = ast.parse(path.read_text())
    owner = {}
    for function in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        for node in ast.walk(function):
            owner[node] = function.name  # ast.walk is breadth-first: inner functions come later and win
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            keywords = {k.arg for k in node.keywords}
            if "generator" in keywords:
                yield owner.get(node, ""), node, keywords


def _keyword(node: ast.Call, name: str) -> str | None:
    return next((ast.unparse(k.value) for k in node.keywords if k.arg == name), None)


def _generator_of(node: ast.Call) -> str:
    return f"{_keyword(node, 'generator')}.device"


def _device_of(node: ast.Call) -> str | None:
    return _keyword(node, "device")


def test_every_random_draw_from_a_generator_names_its_device():
    """Each torch draw from a generator names the generator's own device (``device=g.device``, then ``.to(...)``):
    a CPU stream asked to draw on a tensor's CUDA device fails there, and naming the generator's device keeps a
    seed's draws the same on every machine."""
    unnamed, unrouted = [], []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            for function, node, keywords in _calls(path):
                name = node.func.attr
                if name in DRAWS and ast.unparse(node.func.value) == "torch" and _device_of(node) != _generator_of(node):
                    unnamed.append(f"{where}:{node.lineno} torch.{name}")
                elif name in IN_PLACE and (where, function) not in ROUTED:
                    unrouted.append(f"{where}:{node.lineno} {name} in {function}")
    assert not unnamed, f"draws not on their generator's device (use device=generator.device, then .to(...)): {unnamed}"
    assert not unrouted, f"in-place draws outside the routed helpers (init_parameters, k-means++): {unrouted}"


def test_the_routed_helpers_leave_a_module_where_it_is_and_draw_the_same_numbers():
    from vflpriv.models.encoders import init_parameters

    module = torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.Embedding(4, 2))
    init_parameters(module, generator=torch.Generator().manual_seed(3))
    again = torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.Embedding(4, 2))
    init_parameters(again, generator=torch.Generator().manual_seed(3))
    assert all(torch.equal(a, b) for a, b in zip(module.parameters(), again.parameters()))
    assert {p.device.type for p in module.parameters()} == {"cpu"}


DEVICE = os.environ.get("VFLPRIV_TEST_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
#: How far two runs of one config on CUDA may differ (CUDA's atomic reductions are not bit-reproducible); 0 on the CPU.
SAME_DEVICE_TOLERANCE = 0.02 if DEVICE.startswith("cuda") else 0.0
#: How far the CPU and CUDA runs of one config may end apart: the same draws, other float kernels, 1 epoch on digits.
ACROSS_DEVICES_TOLERANCE = 0.05
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the CPU/CUDA comparison needs one")
sys.path.insert(0, str(ROOT / "tests" / "methods"))
from pretrain_helpers import TINY_MODEL, tiny_options  # noqa: E402

METHODS = ["splitnn", "local-simsiam", "cssl-byol", "gssl-moco", "fedhssl-simsiam", "fedhssl-moco", "vflhlp",
           "ssvfl-i", "ssvfl-c", "oneshot", "fewshot", "local-a", "centralized-lr"]
BINARY = {"direction", "exploit", "norm", "marvell"}
NUMBERS = ("utility", "attack_accuracy", "prior_accuracy", "comm_mb")


def _config(device: str = DEVICE, **changes):
    from vflpriv.config.schema import RunConfig

    data = {"device": device, "partition": {"labeled": 100, "aux": 40}, "model": TINY_MODEL,
            "finetune": {"epochs": 1, "batch_size": 50}, "attack": {"options": {"epochs": 5}, "prior": "simsiam",
                                                                    "prior_epochs": 5}}
    for key, value in changes.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    return RunConfig.model_validate(data)


def _run(config, tmp_path):
    """The record of ``config``, from a cold cache (a second run must compute, not read, its pretraining)."""
    from vflpriv.runner import prior
    from vflpriv.runner.execution import run

    os.environ["VFLPRIV_CACHE"] = str(tmp_path / f"cache-{len(list(tmp_path.iterdir()))}")
    prior._PRIORS.clear()
    prior._ENCODERS.clear()
    (record,) = run(config)
    assert record.status in ("ok", "n/a"), record.error
    assert math.isfinite(record.utility) and record.device.startswith(config.device.split(":")[0])
    if record.status == "ok":
        assert 0.0 <= record.attack_accuracy <= 1.0
    return record


def _same(a, b, tolerance: float = SAME_DEVICE_TOLERANCE) -> None:
    for name in NUMBERS:
        x, y = getattr(a, name), getattr(b, name)
        assert (math.isnan(x) and math.isnan(y)) or abs(x - y) <= tolerance, f"{name}: {x} vs {y}"


@pytest.fixture(autouse=True)
def _own_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path / "cache"))


@pytest.mark.parametrize("method", METHODS)
def test_every_method_runs_on_the_device_and_gives_the_same_record_twice(method, tmp_path):
    from vflpriv.config.registry import METHODS as REGISTERED
    from vflpriv.engine import EPOCH_END

    phase = "pretrain" if method.startswith(("local-", "cssl-", "gssl-", "fedhssl")) else "finetune"
    curve = EPOCH_END in REGISTERED.get(method).supports  # the learning curve's measurement on the device too
    config = _config(method={"name": method, "options": tiny_options(method)}, attack={"name": "mc", "phase": phase},
                     finetune={"curve": curve})
    _same(_run(config, tmp_path), _run(config, tmp_path))


@pytest.mark.parametrize("attack", ["bli", "direction", "dli", "exploit", "gc", "mc", "mc-active", "mc-mixmatch",
                                    "norm", "similarity"])
def test_every_attack_runs_on_the_device_and_gives_the_same_record_twice(attack, tmp_path):
    changes = {"attack": {"name": attack, "options": {"epochs": 5} if attack.startswith("mc") else {}}}
    if attack in BINARY:
        changes["dataset"] = {"name": "breast-cancer"}
        changes["partition"] = {"labeled": 60, "aux": 20}
    if attack == "dli":
        changes["finetune"] = {"top": "sum"}
    config = _config(**changes)
    _same(_run(config, tmp_path), _run(config, tmp_path))


@pytest.mark.parametrize("defense", ["cae", "dcae", "dcor", "discrete-sgd", "dp-gaussian", "grad-perturb", "iso",
                                     "label-dp", "marvell", "max-norm", "mid", "mixup", "sparsify"])
def test_every_defense_acts_on_the_device_and_changes_nothing_at_its_identity(defense, tmp_path):
    from vflpriv.config.registry import DEFENSES

    strength = DEFENSES.get(defense).audit_strengths["finetune"][-1]  # its strongest audit strength
    changes = {"attack": {"name": "gc", "options": {}}}
    if defense in BINARY:
        changes.update(dataset={"name": "breast-cancer"}, partition={"labeled": 60, "aux": 20})
    options = {"epochs": 5, "samples": 5000} if defense in ("cae", "dcae") else {}

    def defended(value):  # no strength: the defense at its identity (λ 0, ε +inf, mixup's 1, ...)
        return _config(**changes, defenses=[{"name": defense, "strength": value, "options": options}])

    undefended, identity = _run(_config(**changes), tmp_path), _run(defended(None), tmp_path)
    _same(identity, undefended)
    acting = _run(defended(strength), tmp_path)
    assert any(getattr(acting, n) != getattr(undefended, n) for n in NUMBERS), "the defense changed nothing"


@needs_cuda
@pytest.mark.parametrize("method", ["splitnn", "fedhssl-simsiam"])
def test_the_cpu_and_cuda_runs_of_one_config_share_their_draws_and_end_within_tolerance(method, tmp_path):
    """Partitions, initial weights and batch orders are the same draws on both devices (CPU generators, moved);
    the final numbers differ only by float kernels, within ``ACROSS_DEVICES_TOLERANCE``."""
    from vflpriv.models.training import index_batches
    from vflpriv.runner.execution import build_federation
    from vflpriv.runner.planning import plan

    configs = {d: _config(d, method={"name": method, "options": tiny_options(method)},
                          defenses=[{"name": "iso", "strength": 1.0, "sweep": True}]) for d in ("cpu", "cuda")}
    plans = {d: plan(c) for d, c in configs.items()}
    assert torch.equal(plans["cpu"].scenario.labeled, plans["cuda"].scenario.labeled)
    feds = {d: build_federation(p) for d, p in plans.items()}
    bottoms = {d: p.method.fresh_bottoms(feds[d]) for d, p in plans.items()}
    for a, b in zip(bottoms["cpu"], bottoms["cuda"]):
        for x, y in zip(a.state_dict().values(), b.state_dict().values()):
            assert torch.equal(x, y.cpu())
    batches = {d: index_batches(f.labeled_aligned(), batch_size=50, generator=f.generator) for d, f in feds.items()}
    assert all(torch.equal(x, y.cpu()) for x, y in zip(batches["cpu"], batches["cuda"]))
    _same(_run(configs["cpu"], tmp_path), _run(configs["cuda"], tmp_path), tolerance=ACROSS_DEVICES_TOLERANCE)
