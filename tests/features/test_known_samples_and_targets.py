"""A feature adversary's auxiliary knowledge (``partition.aux_features``) and its targets: drawn apart from the
canaries and the validation samples, from a stream of their own, deterministic by seed; the targets are the victim's
other training samples whose rows it received and the test samples, and every record says which it scored."""

from __future__ import annotations

import pytest
import torch

from vflpriv.common.errors import ConfigError
from vflpriv.config.schema import DatasetConfig, PartitionConfig
from vflpriv.data.load import load_dataset
from vflpriv.data.scenario import build_scenario, known_features
from vflpriv.runner.execution import run


def _scenario(seed=0, validation=0.0, **partition):
    ds = load_dataset(DatasetConfig(), parties=2)
    return build_scenario(ds, PartitionConfig(**partition), seed=seed, validation=validation)


def _known(seed=0, validation=0.0, aux_features=None, **partition):
    return known_features(_scenario(seed, validation, **partition), aux_features)


def test_known_samples_are_a_tenth_of_the_aligned_trained_on_samples_apart_from_canaries_and_validation():
    sc = _scenario(canaries=20, validation=0.2)
    known = known_features(sc, None)
    assert known.numel() == round(0.1 * sc.aligned.numel())
    assert torch.isin(known, sc.labeled).all()
    assert not torch.isin(known, sc.canaries).any() and not torch.isin(known, sc.validation).any()
    assert torch.equal(known, _known(canaries=20, validation=0.2))  # the seed decides
    assert not torch.equal(known, _known(seed=1, canaries=20, validation=0.2))


def test_drawing_them_moves_no_other_set_and_their_count_is_the_setting():
    default, twelve = _scenario(canaries=20), _scenario(canaries=20, aux_features=12)
    for name in ("aligned", "labeled", "aux", "canaries", "canary_labels", "validation"):
        assert torch.equal(getattr(default, name), getattr(twelve, name)), name
    assert known_features(twelve, 12).numel() == 12


def test_more_known_samples_than_the_trained_on_aligned_samples_are_refused():
    labeled = _scenario(labeled=100, canaries=10).labeled.numel()
    assert _known(labeled=100, canaries=10, aux_features=labeled - 11).numel() == labeled - 11
    with pytest.raises(ConfigError, match="every one of the 90 aligned training samples .* leaving none to attack"):
        _known(labeled=100, canaries=10, aux_features=labeled - 10)  # no target left: refused, not failed later
    with pytest.raises(ConfigError, match="exceeds the 90 aligned training samples the active party trains on"):
        _known(labeled=100, canaries=10, aux_features=labeled - 9)
    assert _known(labeled=100, canaries=10, aux_features=2).numel() == 2


def test_the_record_names_its_targets_and_the_train_targets_leave_the_known_samples_out(tiny, monkeypatch):
    from vflpriv.attacks.features.decoder_attack import FeatureDecoder

    seen = {}
    real = FeatureDecoder.infer

    def spy(self, view):
        seen["view"] = view
        return real(self, view)

    monkeypatch.setattr(FeatureDecoder, "infer", spy)
    (record,) = run(tiny(attack={"name": "fi-decoder", "options": {"epochs": 5}}))
    view = seen["view"]
    assert (record.secret, record.adversary, record.victim, record.status) == ("features", "0", "1", "ok")
    assert record.attack_target == "test" and record.n_targets == view.received["test"].shape[0] == 360
    known, train = view.aux_ids, view.target_ids["train"]
    assert not torch.isin(train, known).any()
    assert known.numel() + train.numel() == 100  # partition.labeled: every trained-on sample was sent
    assert torch.isfinite(torch.tensor([record.feature_mse, record.feature_mse_train, record.prior_mse])).all()
