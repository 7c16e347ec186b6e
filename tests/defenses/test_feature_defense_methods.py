"""Where the feature defenses act: with every method whose shared loop sends a passive party's embeddings, in each phase
whose training calls their points; refused in planning (IncompatibleError, the reason named) everywhere else, so no
defense is ever silently skipped by a loop of a method's own."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from vflpriv.common.errors import IncompatibleError
from vflpriv.config.schema import RunConfig
from vflpriv.runner.planning import plan

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "methods"))
from pretrain_helpers import TINY_MODEL, tiny_options  # noqa: E402

#: The built-in methods (a method registered later declares its own case here).
BUILT_IN = ["centralized-gbdt", "centralized-lr", "cssl-byol", "cssl-moco", "cssl-simsiam", "fedhssl", "fedhssl-byol",
            "fedhssl-moco", "fedhssl-simsiam", "fewshot", "gssl-byol", "gssl-moco", "gssl-simsiam", "local-a",
            "local-byol", "local-moco", "local-simsiam", "oneshot", "splitnn", "ssvfl-c", "ssvfl-i", "vflhlp",
            "vflhlp-a", "vflhlp-p"]
#: Written by hand from each method's paper: the methods whose finetuning is the shared split loop (every SSL
#: pretraining finetunes by it, as do SS-VFL-C and VFLHLP); SS-VFL-I, one-shot and few-shot train their heads with
#: loops of their own, and the references send nothing.
SHARED_FINETUNING = ("splitnn", "local-simsiam", "local-byol", "local-moco", "cssl-", "gssl-", "fedhssl", "ssvfl-c",
                     "vflhlp")
#: One-shot and few-shot VFL: each passive party's local semi-supervised training has a loss on its own features and
#: an extractor it sends from (paper 002, Alg. 1 lines 29-34), so every feature defense acts there.
LOCAL_SSL_FINETUNING = ("oneshot", "fewshot")
#: SS-VFL-I releases each passive party's frozen encoder's representations once (paper 003, Alg. 1): only a mechanism
#: on the rows sent (embedding-dp's) has something to act on; no passive loss exists there.
ONE_RELEASE = ("ssvfl-i",)
#: The pretrainings that train a passive encoder by the shared SSL loops (VFLHLP's SCARF is a loop of its own).
SHARED_PRETRAINING = ("local-simsiam", "local-byol", "local-moco", "cssl-", "gssl-", "fedhssl", "ssvfl-c", "ssvfl-i")
WHERE = {("nopeek", "finetune"): SHARED_FINETUNING + LOCAL_SSL_FINETUNING,
         ("mid-sender", "finetune"): SHARED_FINETUNING + LOCAL_SSL_FINETUNING,
         ("fi-adversarial", "finetune"): SHARED_FINETUNING + LOCAL_SSL_FINETUNING,
         ("embedding-dp", "finetune"): SHARED_FINETUNING + LOCAL_SSL_FINETUNING + ONE_RELEASE,
         ("nopeek", "pretrain"): SHARED_PRETRAINING, ("fi-adversarial", "pretrain"): SHARED_PRETRAINING,
         ("mid-sender", "pretrain"): (), ("embedding-dp", "pretrain"): ()}
REASONS = ("sends none", "a loop of its own", "has no passive training in finetuning", "has no pretraining phase",
           "acts in finetune only")


def _planned(defense: str, phase: str, method: str) -> str:
    """'' when the run plans, else the planner's reason."""
    config = RunConfig.model_validate({
        "partition": {"labeled": 100, "aux": 40}, "model": TINY_MODEL, "attack": {"name": "fi-decoder"},
        "method": {"name": method, "options": tiny_options(method)},
        "defenses": [{"name": defense, "strength": 1.0, "phase": phase}]})
    try:
        plan(config)
    except IncompatibleError as exc:
        return str(exc)
    return ""


@pytest.mark.parametrize(("defense", "phase"), list(WHERE), ids=[f"{d}-{p}" for d, p in WHERE])
def test_a_feature_defense_plans_exactly_where_a_shared_loop_calls_its_points(defense, phase):
    for method in BUILT_IN:
        reason = _planned(defense, phase, method)
        if method.startswith(WHERE[defense, phase]):
            assert reason == "", f"{defense} in {phase} with {method}: {reason}"
        else:
            assert any(r in reason for r in REASONS), f"{defense} in {phase} with {method}: {reason or 'planned'}"
