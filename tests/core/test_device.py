"""Device cleanliness: every random draw from an explicit generator says on which device it is made (a CUDA stream
cannot fill a CPU tensor, nor the reverse), and, where CUDA is present, every method, attack and defense runs on it.

The CUDA runs skip on a machine without CUDA; ``VFLPRIV_TEST_DEVICE=cpu`` runs the same cases on the CPU (how their
settings were checked on a machine without a GPU).
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
PACKAGES = ("vflpriv", "attacks", "defenses", "tradeoff", "reports")
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


def test_every_random_draw_from_a_generator_names_its_device():
    unnamed, unrouted = [], []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            for function, node, keywords in _calls(path):
                name = node.func.attr
                if name in DRAWS and ast.unparse(node.func.value) == "torch" and "device" not in keywords:
                    unnamed.append(f"{where}:{node.lineno} torch.{name}")
                elif name in IN_PLACE and (where, function) not in ROUTED:
                    unrouted.append(f"{where}:{node.lineno} {name} in {function}")
    assert not unnamed, f"draws that name no device (use device=generator.device, then .to(...)): {unnamed}"
    assert not unrouted, f"in-place draws outside the routed helpers (init_parameters, k-means++): {unrouted}"


def test_the_routed_helpers_leave_a_module_where_it_is_and_draw_the_same_numbers():
    from vflpriv.models.encoders import init_parameters

    module = torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.Embedding(4, 2))
    init_parameters(module, generator=torch.Generator().manual_seed(3))
    again = torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.Embedding(4, 2))
    init_parameters(again, generator=torch.Generator().manual_seed(3))
    assert all(torch.equal(a, b) for a, b in zip(module.parameters(), again.parameters()))
    assert {p.device.type for p in module.parameters()} == {"cpu"}


DEVICE = os.environ.get("VFLPRIV_TEST_DEVICE", "cuda")
needs_device = pytest.mark.skipif(DEVICE == "cuda" and not torch.cuda.is_available(),
                                  reason="no CUDA device (VFLPRIV_TEST_DEVICE=cpu runs these cases on the CPU)")
sys.path.insert(0, str(ROOT / "tests" / "methods"))
from pretrain_helpers import TINY_MODEL, tiny_options  # noqa: E402

METHODS = ["splitnn", "local-simsiam", "cssl-byol", "gssl-moco", "fedhssl-simsiam", "fedhssl-moco", "vflhlp",
           "ssvfl-i", "ssvfl-c", "oneshot", "fewshot", "local-a", "centralized-lr"]
BINARY = {"direction", "exploit", "norm", "marvell"}


def _config(**changes):
    from vflpriv.config.schema import RunConfig

    data = {"device": DEVICE, "partition": {"labeled": 100, "aux": 40}, "model": TINY_MODEL,
            "finetune": {"epochs": 1, "batch_size": 50}, "attack": {"options": {"epochs": 5}, "prior": "simsiam",
                                                                    "prior_epochs": 5}}
    for key, value in changes.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    return RunConfig.model_validate(data)


def _check(record) -> None:
    assert record.status in ("ok", "n/a"), record.error
    assert math.isfinite(record.utility)
    if record.status == "ok":
        assert 0.0 <= record.attack_accuracy <= 1.0


@needs_device
@pytest.mark.parametrize("method", METHODS)
def test_every_method_runs_on_the_device(method):
    from vflpriv.config.registry import METHODS as REGISTERED
    from vflpriv.engine import EPOCH_END
    from vflpriv.runner.execution import run

    phase = "pretrain" if method.startswith(("local-", "cssl-", "gssl-", "fedhssl")) else "finetune"
    curve = EPOCH_END in REGISTERED.get(method).supports  # the learning curve's measurement on the device too
    (record,) = run(_config(method={"name": method, "options": tiny_options(method)},
                            attack={"name": "mc", "phase": phase}, finetune={"curve": curve}))
    _check(record)


@needs_device
@pytest.mark.parametrize("attack", ["bli", "direction", "dli", "exploit", "gc", "mc", "mc-active", "mc-mixmatch",
                                    "norm", "similarity"])
def test_every_attack_runs_on_the_device(attack):
    from vflpriv.runner.execution import run

    changes = {"attack": {"name": attack, "options": {"epochs": 5} if attack.startswith("mc") else {}}}
    if attack in BINARY:
        changes["dataset"] = {"name": "breast-cancer"}
        changes["partition"] = {"labeled": 60, "aux": 20}
    if attack == "dli":
        changes["finetune"] = {"top": "sum"}
    (record,) = run(_config(**changes))
    _check(record)


@needs_device
@pytest.mark.parametrize("defense", ["cae", "dcae", "dcor", "discrete-sgd", "dp-gaussian", "grad-perturb", "iso",
                                     "label-dp", "marvell", "max-norm", "mid", "mixup", "sparsify"])
def test_every_defense_runs_on_the_device(defense):
    from vflpriv.config.registry import DEFENSES
    from vflpriv.runner.execution import run

    axis = DEFENSES.get(defense).axis
    strength = axis.search[0] if axis.search else 0.5
    changes = {"defenses": [{"name": defense, "strength": strength, "sweep": True}], "attack": {"name": "gc", "options": {}}}
    if defense in BINARY:
        changes.update(dataset={"name": "breast-cancer"}, partition={"labeled": 60, "aux": 20})
    if defense in ("cae", "dcae"):
        changes["defenses"][0]["options"] = {"epochs": 5, "samples": 5000}
    (record,) = run(_config(**changes))
    _check(record)
