"""The partition's draws at their edges: the aligned count is the one ``aligned_fraction`` gives (refused, and named,
when the labeled samples do not fit in it), and the canary step draws nothing without canaries, so the validation
split drawn after it is the one a partition without that step draws."""

from __future__ import annotations

import pytest
import torch

import vflpriv.data.scenario as scenario
from vflpriv.common.errors import ConfigError
from vflpriv.config.schema import PartitionConfig
from vflpriv.data.embedded import load_breast_cancer, load_digits
from vflpriv.data.scenario import build_scenario


@pytest.fixture(scope="module")
def cancer():
    return load_breast_cancer(parties=2)


def test_the_aligned_count_is_the_fraction_s_and_labeled_must_fit_in_it(cancer):
    n = cancer.y_train.shape[0]
    fits = build_scenario(cancer, PartitionConfig(labeled=2, aux=10, aligned_fraction=2 / n), seed=0)
    assert fits.aligned.numel() == 2 and fits.labeled.numel() == 2
    for aligned, fraction in ((1, 1 / n), (0, 0.4 / n)):
        with pytest.raises(ConfigError, match=f"labeled=2 exceeds the {aligned} aligned samples"):
            build_scenario(cancer, PartitionConfig(labeled=2, aux=10, aligned_fraction=fraction), seed=0)


@pytest.mark.parametrize("seed", [0, 3])
def test_without_canaries_the_canary_step_draws_nothing_from_the_partition_s_stream(monkeypatch, seed):
    digits = load_digits(parties=2)
    part = PartitionConfig(labeled=200, aux=40, aux_source="labeled")
    drawn = build_scenario(digits, part, seed=seed, validation=0.25)
    empty = torch.empty(0, dtype=torch.long)
    monkeypatch.setattr(scenario, "_draw_canaries", lambda pool, count, g: empty)
    skipped = build_scenario(digits, part, seed=seed, validation=0.25)
    assert drawn.canaries.numel() == 0 and torch.equal(drawn.validation, skipped.validation)
