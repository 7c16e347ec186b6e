"""``partition.aux_features`` is read only by a feature attack and its prior: the training and the caches a label
attack fills keep their keys (its run's: test_revision_zero_cache_keys), and one training serves every count."""

from __future__ import annotations

import json

import torch

from vflpriv.config.registry import METHODS
from vflpriv.config.schema import RunConfig
from vflpriv.data.scenario import known_features
from vflpriv.runner.execution import blank_record, pretrain_key
from vflpriv.runner.planning import plan
from vflpriv.runner.prior import PriorPlan, encoder_key


def _run(attack: str, aux_features: int | None) -> RunConfig:
    return RunConfig.model_validate({"attack": {"name": attack}, "partition": {"aux_features": aux_features},
                                     "method": {"name": "splitnn"}})


def test_the_pretraining_and_the_label_prior_s_encoder_keep_their_keys_and_a_feature_run_is_keyed_by_it():
    plain, known = _run("fi-decoder", None), _run("fi-decoder", 5)
    method = METHODS.get("fedhssl")
    assert pretrain_key(known.training(), method) == pretrain_key(plain.training(), method)
    assert encoder_key(PriorPlan(known, "simsiam", False, {}, False)) == encoder_key(
        PriorPlan(plain, "simsiam", False, {}, False))
    assert known.training_key() == plain.training_key() and known.key() != plain.key()


def test_one_training_serves_feature_runs_of_every_count_each_with_its_own_known_samples():
    p = plan([_run("mc", 5), _run("fi-decoder", None), _run("fi-decoder", 5)])
    label, default, five = p.attacks
    assert label.known is None and five.known.numel() == 5
    assert torch.equal(default.known, known_features(p.scenario, None)) and default.known.numel() != 5
    assert default.prior.training != five.prior.training  # the feature prior is fitted on the known samples


def test_a_label_run_s_record_holds_its_configuration_as_read_and_a_feature_run_s_its_count():
    """Else a store holding label runs written beside a feature attack and without one showed two variants."""
    configs = {name: json.loads(blank_record(_run(name, 5)).config) for name in ("mc", "fi-decoder")}
    assert configs["mc"]["partition"]["aux_features"] is None
    assert configs["fi-decoder"]["partition"]["aux_features"] == 5
