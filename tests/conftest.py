"""Shared tiny settings so end-to-end tests run in seconds."""

from __future__ import annotations

import pytest
import torch

from vflpriv.config import registry
from vflpriv.config.schema import RunConfig


def tiny_run(**changes) -> RunConfig:
    """A digits run with few epochs everywhere; ``changes`` are top-level RunConfig fields."""
    data = {
        "partition": {"labeled": 100, "aux": 40},
        "model": {"hidden": 64, "out_dim": 32},
        "finetune": {"epochs": 2, "batch_size": 32},
        "attack": {"options": {"epochs": 20}, "prior": "aux", "prior_epochs": 20},
    }
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return RunConfig.model_validate(data)


@pytest.fixture(autouse=True)
def _one_thread():
    """Tests run tiny models: one intra-op thread is faster than two and immune to a busy machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module", autouse=True)
def _module_cache(tmp_path_factory):
    """A module's shared fixtures (a store trained once for its tests) get a cache folder of their own too, set up
    before them: otherwise they ran with ``VFLPRIV_CACHE`` unset and wrote the user's ``~/.cache/vflpriv``, shared by
    both xdist workers."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VFLPRIV_CACHE", str(tmp_path_factory.mktemp("module-cache")))
        patch.setenv("VFLPRIV_CANARY_KEY", CANARY_KEY)
        yield


#: The tests' one canary key: the canaries' labels, like every other draw, are the same from run to run.
CANARY_KEY = "0123456789abcdef" * 4


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own pretraining cache: no hits from earlier runs or other tests; and one fixed canary key,
    so the canaries' labels, like every other draw, are the same from run to run."""
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("VFLPRIV_CANARY_KEY", CANARY_KEY)


@pytest.fixture(autouse=True)
def _registries_restored():
    """A component a test registers at run time is gone after it: no test sees another's plugins (the docs tests
    register the plugin guide's examples, and an audit's battery would then include them)."""
    kept = {reg.kind: dict(reg._extra) for reg in _REGISTRIES}
    yield
    for reg in _REGISTRIES:
        reg._extra.clear()
        reg._extra.update(kept[reg.kind])


_REGISTRIES = (registry.METHODS, registry.ATTACKS, registry.DEFENSES, registry.DATASETS, registry.AUDITORS)


@pytest.fixture
def tiny():
    return tiny_run


class _QuieterTorch:
    """``torch`` as dp-gaussian's module draws with, its ``randn`` 10x smaller."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def randn(*args, **kwargs):
        return torch.randn(*args, **kwargs) / 10


@pytest.fixture
def tenfold_too_little_noise(monkeypatch):
    """A context in which dp-gaussian draws noise 10x smaller than its accountant assumes (the bug an audit must
    catch), made by patching the ``torch`` its module draws with: a plugin subclass changing the noise records no
    epsilon (review l9), and patched module globals are tampering no claim check sees (docs/plugins.md)."""
    import contextlib

    from vflpriv.defenses import dp_gaussian

    @contextlib.contextmanager
    def quieter():
        with monkeypatch.context() as patch:
            patch.setattr(dp_gaussian, "torch", _QuieterTorch())
            yield

    return quieter
