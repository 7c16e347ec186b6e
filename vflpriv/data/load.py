"""Resolve a dataset config through the registry; loaded datasets are kept per process, and those bundled
with a package (``bundled`` loaders: scikit-learn's) in the cache across processes. :func:`data_fingerprint` names the
data every cached state and stored record derived from a dataset is keyed by.

A bundled dataset depends only on the loader's code, the data file it reads (``vflpriv.data.bundled``) and the
arguments, so its tensors are cached under a hash of those (the file's SHA-256: a changed file is another key): a
sweep's workers and every later command load them in milliseconds instead of parsing and splitting again. Entries are verified
(checksum, and the dataset's own consistency checks) and recomputed when they do not check out; a cache
that cannot be written only means the dataset is loaded the slow way.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

import torch

from vflpriv.common.components import built
from vflpriv.common.errors import CacheError, DataError
from vflpriv.config.registry import DATASETS
from vflpriv.config.schema import DatasetConfig, RunConfig, TrainingConfig, config_hash
from vflpriv.data import bundled
from vflpriv.data.base import VerticalDataset, declaration_problem, values_problem
from vflpriv.store import cache
from vflpriv.store.verification import DECLARED


@lru_cache(maxsize=4)
def _load(name: str, parties: int, root: Path | None, max_samples: int | None) -> tuple[VerticalDataset, str | None]:
    """The dataset, and the digest of the files it was read from where its loader names them (``files_read``)."""
    loader = DATASETS.get(name)
    dataset = _loaded(name, loader, parties, root, max_samples)  # first: the loader's own errors come first
    problem = declaration_problem(dataset.fitted_features, dataset.parties)  # changed after construction
    if problem := problem or values_problem(dataset):
        raise DataError(f"dataset '{name}' as its loader returned it: {problem}")
    reads = getattr(loader, "files_read", None)  # a plugin's own: its failure (a missing file too) one error line
    return dataset, None if reads is None else built("dataset", name, lambda: files_digest(reads(root)))


def files_digest(paths: list[Path]) -> str:
    """SHA-256 over the files' names and SHA-256s, in the order given."""
    digest = hashlib.sha256()
    for path in paths:
        one = hashlib.sha256()
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                one.update(chunk)
        digest.update(f"{path.name}|{one.hexdigest()}|".encode())
    return digest.hexdigest()


def _loaded(name: str, loader, parties: int, root: Path | None, max_samples: int | None) -> VerticalDataset:
    def load() -> VerticalDataset:  # a plugin loader's own failure: one error naming it (review lo7 F6)
        return built("dataset", name, lambda: loader(parties=parties, root=root, max_samples=max_samples, seed=0))

    name_in_package = getattr(loader, "bundled_as", None)
    source = bundled.digest(name_in_package) if name_in_package is not None and root is None else None
    if source is None:  # not bundled, or its file not found (scikit-learn's own loader reads it): no cache
        return load()
    key = config_hash({"code": cache.code_version(), "loader": f"{loader.__module__}.{loader.__qualname__}",
                       "file": source, "parties": parties, "max_samples": max_samples}, 24)
    return cached_dataset(cache.cache_root() / "datasets" / f"{key}.entry", load)


def cached_dataset(path: Path, load) -> VerticalDataset:
    """The dataset stored at ``path``, else ``load()`` it and store it (best effort)."""
    try:
        return cache.cached(path, load, read=_read, write=_write, lock=cache.claim(path.stem, path.parent))
    except OSError:  # an unwritable cache folder: load without it
        return load()


def _write(path: Path, dataset: VerticalDataset) -> None:
    buffer = io.BytesIO()
    torch.save(dataset.payload(), buffer)
    cache.write_entry(path, buffer.getvalue())


def _read(path: Path) -> VerticalDataset:
    _, payload = cache.read_entry(path)
    try:
        return VerticalDataset.from_payload(torch.load(io.BytesIO(payload), weights_only=True))
    except Exception as exc:  # noqa: BLE001 - any payload that is not a consistent dataset is a corrupt entry
        raise CacheError(f"not a dataset ({type(exc).__name__}: {exc})") from None


def load_dataset(config: DatasetConfig, *, parties: int) -> VerticalDataset:
    """The dataset named in ``config``, split for ``parties`` parties (cached: sweeps load it once)."""
    return _load(config.name, parties, config.root, config.max_samples)[0]


def data_fingerprint(config: DatasetConfig, *, parties: int) -> str:
    """What every cached state and stored record derived from the dataset names its data by: '' for a bundled dataset
    read from the file vflpriv pins (``bundled.PINNED``), the digest of the files read where the loader names them
    (``files_read``: the tensors are then a function of those files, of the loader's code, which the caches' keys
    hold, and of the arguments, which every key holds), else the loaded tensors' SHA-256 (``VerticalDataset.digest``,
    whatever loader, a plugin's included, made them), after a plugin's declaration of fitted preprocessings
    (:func:`_declared`). The files' digest is the cheaper where a loader expands its
    files (Fashion-MNIST's 30 MB of gzip are 220 MB of float tensors: ``benchmarks/data_digest_cost.py``)."""
    name_in_package = getattr(DATASETS.get(config.name), "bundled_as", None)
    if name_in_package is not None and config.root is None and bundled.digest(name_in_package) == bundled.PINNED.get(
            name_in_package):
        return ""
    dataset, files = _load(config.name, parties, config.root, config.max_samples)
    return _declared(config.name, dataset) + (f"files:{files}" if files is not None else dataset.digest)


def _declared(name: str, dataset: VerticalDataset) -> str:
    """A plugin dataset's ``fitted_features`` as its fingerprint names them where they withhold a feature epsilon (a
    fitted preprocessing declared, or none declared): a changed declaration is other data, its stored epsilon never
    resumed (review fe2 R3); '' where every party declares none (the fingerprint as before) and for a built-in loader,
    whose declarations the claim digest pins (tests/core/test_claim_version.py)."""
    fitted = dataset.fitted_features
    if DATASETS.builtin(name) or (fitted is not None and not any(fitted)):
        return ""
    return f"{DECLARED}{config_hash({'fitted_features': None if fitted is None else list(fitted)}, 8)}|"


def data_of(config: TrainingConfig) -> str:
    """:func:`data_fingerprint` of a training's dataset, as its parties split it."""
    return data_fingerprint(config.dataset, parties=config.partition.parties)


def data_by_key(configs: Iterable[RunConfig]) -> dict[str, str]:
    """:func:`data_of` of each run, by its key, each distinct dataset (name, folder, cap, parties) fingerprinted once: a
    grid interleaving more datasets than the load cache keeps would otherwise load and hash them again per run."""
    seen: dict[tuple, str] = {}
    found = {}
    for c in configs:
        data = (c.dataset.name, c.dataset.root, c.dataset.max_samples, c.partition.parties)
        if data not in seen:
            seen[data] = data_of(c)
        found[c.key()] = seen[data]
    return found
