"""A cache entry is the entry of its own key: a well-formed, self-consistent entry file copied under another key
(another CAE strength's autoencoder, another prior's labels, another dataset's tensors) is reported, discarded and
recomputed, never loaded, and the numbers equal a cold run's."""

from __future__ import annotations

import shutil

import pytest
import torch

from vflpriv.config.schema import RunConfig
from vflpriv.runner.execution import run
from vflpriv.store import cache


def test_a_modules_entry_copied_under_another_key_is_recomputed():
    def compute(value):
        return lambda: [_filled(value)]

    cache.cached_modules("key-a", lambda: [torch.nn.Linear(2, 3)], compute(1.0))
    cache.cached_modules("key-b", lambda: [torch.nn.Linear(2, 3)], compute(2.0))
    shutil.copyfile(cache.entry_path("key-b"), cache.entry_path("key-a"))
    with pytest.warns(UserWarning, match="discarded and recomputed"):
        (found,) = cache.cached_modules("key-a", lambda: [torch.nn.Linear(2, 3)], compute(1.0))
    assert torch.equal(found.weight, torch.full((3, 2), 1.0))


def _filled(value: float) -> torch.nn.Module:
    net = torch.nn.Linear(2, 3)
    with torch.no_grad():
        net.weight.fill_(value), net.bias.fill_(value)
    return net


def test_a_labels_entry_copied_under_another_key_is_recomputed():
    cache.cached_labels("prior-a", lambda: {"test": [0, 1]})
    cache.cached_labels("prior-b", lambda: {"test": [1, 0]})
    shutil.copyfile(cache.cache_dir() / "prior-b.labels", cache.cache_dir() / "prior-a.labels")
    with pytest.warns(UserWarning, match="discarded and recomputed"):
        assert cache.cached_labels("prior-a", lambda: {"test": [0, 1]}) == {"test": [0, 1]}


QUICK_CAE = {"samples": 5000, "epochs": 5}


def _cae(strength: float, tiny) -> RunConfig:
    return tiny(dataset={"name": "breast-cancer"}, partition={"labeled": 80, "aux": 20, "aux_features": 10},
                attack={"name": "fi-decoder", "options": {"epochs": 5}},
                defenses=[{"name": "cae", "strength": strength, "sweep": True, "options": QUICK_CAE}])


def test_a_cae_autoencoder_entry_swapped_for_another_strength_s_is_retrained_with_a_cold_run_s_numbers(tiny):
    (cold,) = run(_cae(0.5, tiny))
    before = set(cache.cache_dir().glob("*.entry"))
    run(_cae(1.0, tiny))
    (mine,), (theirs,) = before, set(cache.cache_dir().glob("*.entry")) - before  # the 0.5 and 1.0 autoencoders
    shutil.copyfile(theirs, mine)
    with pytest.warns(UserWarning, match="discarded and recomputed"):
        (again,) = run(_cae(0.5, tiny))
    assert again.status == "ok"
    assert (again.utility, again.feature_mse, again.prior_mse) == (cold.utility, cold.feature_mse, cold.prior_mse)
