"""Pretraining cache: a finetune-phase strength sweep pretrains once per seed.

Keyed by a hash of everything pretraining depends on (dataset, partition, model, method and its
options, the defenses acting in the pretraining phase, seed, and the source code that runs it). Stores the pretrained modules' state
dicts (loaded with ``torch.load(weights_only=True)`` into the method's ``skeleton``) and the
pretraining traffic the meter counted, so a cached run reports the same communication as a fresh one.
Files are written to a temporary name and renamed, so parallel workers never read half a file, and a
per-key file lock makes a parallel run wait for a pretraining in progress rather than repeat it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import os
from functools import lru_cache
from pathlib import Path

import torch
from filelock import FileLock
from torch import nn

from vflpriv.config import RunConfig
from vflpriv.engine import PRETRAIN, Meter
from vflpriv.registry import DEFENSES

ENV_VAR = "VFLPRIV_CACHE"


def cache_dir() -> Path:
    """``$VFLPRIV_CACHE`` if set, else ``~/.cache/vflpriv``; pretrainings live in its ``pretrain/``."""
    return Path(os.environ.get(ENV_VAR) or Path.home() / ".cache" / "vflpriv") / "pretrain"


#: vflpriv's packages; the last four are installed from top-level folders (setuptools package-dir).
PACKAGES = ("vflpriv", "vflpriv.attacks", "vflpriv.defenses", "vflpriv.tradeoff", "vflpriv.reports")


@lru_cache(maxsize=1)
def code_version() -> str:
    """Hash of vflpriv's own source (every package folder): editing the code invalidates every cached pretraining."""
    digest = hashlib.sha256()
    for package in PACKAGES:
        for folder in importlib.util.find_spec(package).submodule_search_locations:
            for path in sorted(Path(folder).rglob("*.py")):
                digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


#: Partition fields that only choose labeled samples: the aligned and local sets are drawn before them.
LABEL_FIELDS = {"labeled", "aux", "aux_source", "active_labels_local"}


def pretrain_key(config: RunConfig, method: type) -> str:
    """Hash of what pretraining can depend on: config parts, the method's code and vflpriv's code.

    A method whose pretraining reads no labels shares one pretraining across label budgets; one that
    reads them (supervised pretraining) is keyed by the label budget and by every label defense too.
    """
    method_file = Path(inspect.getfile(method))
    payload = {
        "code": code_version(),
        "method_code": hashlib.sha256(method_file.read_bytes()).hexdigest()[:16],
        "dataset": config.dataset.model_dump(mode="json"),
        "partition": config.partition.model_dump(
            mode="json", exclude=None if method.pretrain_reads_labels else LABEL_FIELDS
        ),
        "model": config.model.model_dump(mode="json"),
        "method": config.method.model_dump(mode="json"),
        "defenses": [d.model_dump(mode="json", exclude={"sweep"}) for d in config.defenses
                     if d.phase == PRETRAIN or (method.pretrain_reads_labels and _acts_on_labels(d.name))],
        "seed": config.seed,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:24]


def _acts_on_labels(defense: str) -> bool:
    """A label defense (e.g. label DP) changes the labels of every phase, whatever its ``phase``."""
    return "labels" in DEFENSES.get(defense).supported_kinds


def claim(key: str) -> FileLock:
    """An inter-process lock on ``key``: held while one run pretrains it, so parallel runs of a sweep
    (other strengths or label budgets of the same seed) wait and load it instead of pretraining it again."""
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    return FileLock(directory / f"{key}.lock")


def load(key: str, skeleton: list[nn.Module], meter: Meter) -> bool:
    """Fill ``skeleton`` with the cached weights and ``meter`` with the cached traffic; False on a miss."""
    path = cache_dir() / f"{key}.pt"
    if not path.exists():
        return False
    saved = torch.load(path, map_location="cpu", weights_only=True)
    for module, state in zip(skeleton, saved["modules"]):
        module.load_state_dict(state)
    for phase, direction, kind, size, count in saved["traffic"]:
        meter.bytes[(phase, direction, kind)] += size
        meter.messages[(phase, direction, kind)] += count
    return True


def save(key: str, modules: list[nn.Module], meter: Meter) -> None:
    """Store the pretrained modules and the pretraining traffic under ``key``."""
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    traffic = [[*k, meter.bytes[k], meter.messages[k]] for k in meter.messages if k[0] == PRETRAIN]
    tmp = directory / f"{key}.{os.getpid()}.tmp"
    torch.save({"modules": [m.state_dict() for m in modules], "traffic": traffic}, tmp)
    tmp.replace(directory / f"{key}.pt")
