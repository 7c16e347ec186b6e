"""Attack options asking for more than the data hold are refused while planning, naming the most there is, instead
of running with the value quietly reduced."""

from __future__ import annotations

import pytest
import torch

from vflpriv.common.errors import IncompatibleError
from vflpriv.config.schema import RunConfig
from vflpriv.models.training import batch_count, index_batches
from vflpriv.runner.planning import plan


@pytest.mark.parametrize("n", [1, 2, 63, 64, 65, 66, 127, 128, 129, 200])
@pytest.mark.parametrize("batch_size", [2, 64, 128])
def test_batch_count_is_the_number_of_batches_index_batches_cuts(n, batch_size):
    assert batch_count(n, batch_size=batch_size) == len(index_batches(torch.arange(n), batch_size=batch_size,
                                                                       generator=None))


def _run(attack: str, options: dict, **partition) -> RunConfig:
    return RunConfig.model_validate({"method": {"name": "splitnn"}, "partition": {"labeled": 200, **partition},
                                     "attack": {"name": attack, "options": options}})


@pytest.mark.parametrize(("attack", "options", "partition", "needle"), [
    ("bli", {"batches": 5}, {}, "batches=5, but finetuning epoch 0 has 4 batch(es) (200 labeled samples at "
                                "finetune.batch_size=64); give at most 4"),
    ("gc", {"neighbours": 201}, {}, "neighbours=201 exceeds the 200 training targets"),
    ("similarity", {"known_per_class": 9}, {"aux": 80}, "known_per_class=9 for 10 classes needs 90 auxiliary "
                                                         "labels; the adversary holds partition.aux=80 (give at most 8"),
])
def test_an_option_beyond_the_data_is_refused(attack, options, partition, needle):
    with pytest.raises(IncompatibleError, match="give at most") as refused:
        plan([_run(attack, options, **partition)])
    assert needle in str(refused.value)


@pytest.mark.parametrize(("attack", "options", "partition"), [
    ("bli", {"batches": 4}, {}), ("gc", {"neighbours": 200}, {}), ("similarity", {"known_per_class": 8}, {"aux": 80}),
])
def test_the_most_the_data_hold_is_accepted(attack, options, partition):
    plan([_run(attack, options, **partition)])


def test_where_the_active_party_labels_its_local_samples_the_count_is_left_to_the_run():
    """VFLHLP trains on every local labeled sample: 200 labeled aligned samples do not bound its batches."""
    run = RunConfig.model_validate({"method": {"name": "vflhlp"}, "partition": {"labeled": 200},
                                    "attack": {"name": "gc", "options": {"neighbours": 201}}})
    plan([run])
