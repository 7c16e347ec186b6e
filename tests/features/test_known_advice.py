"""Review hunt2 N8: where a feature attack has too few known samples, the advice is one that works (the canaries took
them: raising partition.aligned_fraction changed nothing, and aux_features=2 was refused), and aux_features' bound
is said once, by the setting (1 passed it, then planning refused it)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from vflpriv.config.schema import DatasetConfig, PartitionConfig
from vflpriv.data.load import load_dataset
from vflpriv.data.scenario import build_scenario, known_features

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_helpers import planned  # noqa: E402


def _scenario(**partition):
    return build_scenario(load_dataset(DatasetConfig(), parties=2), PartitionConfig(**partition), seed=0)


@pytest.mark.parametrize("followed", [["196"], ["199", "--set", "partition.labeled=203"]])
def test_evaluate_sets_the_attack_aside_with_advice_that_works(followed, tmp_path, monkeypatch):
    """Each advice followed alone plans the attack (review misc2 M1: with aux_features unset, its count is at most half
    the pool, and the advice sized the pool for one target more than the known samples: set aside again)."""
    args = ["evaluate", "--attack", "fi-decoder,mc", "--defense", "none", "--seeds", "0", "--canaries", "199"]
    result = planned(args, tmp_path, monkeypatch)
    assert result.exit_code == 0, result.output
    aside = " ".join(result.output.split())
    assert "lower partition.canaries to at most 196, or raise partition.labeled (by 3 or more)" in aside
    assert "aligned_fraction" not in aside and "set partition.aux_features" not in aside
    followed = planned([*args[:-1], *followed], tmp_path, monkeypatch)
    assert followed.exit_code == 0 and "set aside" not in followed.output, followed.output


def test_canaries_that_leave_too_few_trained_on_samples_are_named_with_the_count_that_works():
    from vflpriv.data.scenario import known_advice

    advice = known_advice(_scenario(labeled=20, canaries=18), 2, 2)
    assert ("there are 2: lower partition.canaries to at most 17, or raise partition.labeled (by 1 or more); and set "
            "partition.aux_features=2") in advice
    assert "aligned_fraction" not in advice
    assert known_features(_scenario(labeled=20, canaries=17), 2).numel() == 2  # the advice followed works


def test_a_pool_large_enough_is_told_the_aux_features_range():
    from vflpriv.data.scenario import known_advice

    advice = known_advice(_scenario(labeled=20, canaries=10), 2, None)
    assert advice == "set partition.aux_features=2 or more (at most 9)"
    assert known_features(_scenario(labeled=20, canaries=10), 9).numel() == 9


def test_aux_features_below_two_is_refused_by_the_setting():
    with pytest.raises(ValidationError, match="greater than or equal to 2"):
        PartitionConfig(aux_features=1)
    assert PartitionConfig(aux_features=2).aux_features == 2


def test_the_labeled_samples_to_add_count_those_validation_holds_out_of_them():
    """With finetune.validation=0.5, each labeled sample added holds out half of one: 'by 2' left the pool short."""
    from vflpriv.data.scenario import known_advice

    def scenario(labeled):
        return build_scenario(load_dataset(DatasetConfig(), parties=2), PartitionConfig(labeled=labeled, canaries=18),
                              seed=0, validation=0.5)

    assert "raise partition.labeled (by 4 or more)" in known_advice(scenario(40), 2, None, 0.5)
    assert known_features(scenario(44), None).numel() == 2 > known_features(scenario(43), None).numel()
