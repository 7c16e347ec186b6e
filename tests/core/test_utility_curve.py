"""``finetune.curve``: utility and MB per finetuning epoch, measured without touching the training (paper 003 Table 1)."""

from __future__ import annotations

import json

import pytest

from vflpriv.common.errors import IncompatibleError
from vflpriv.runner.execution import run

SAME = ("utility", "attack_accuracy", "prior_accuracy", "comm_mb", "comm_messages", "comm_mb_finetune",
        "comm_messages_inference", "traffic")


@pytest.mark.parametrize("changes", [
    {"method": {"name": "splitnn"}, "defenses": [{"name": "iso", "strength": 1.0, "sweep": True}]},  # noise on the channel
    {"method": {"name": "splitnn"}, "defenses": [{"name": "mid", "strength": 0.1, "sweep": True}]},  # noise at inference too
    {"method": {"name": "splitnn"}, "defenses": [{"name": "embedding-dp", "strength": 1.0, "sweep": True}]},  # DP-SGD
    {"method": {"name": "ssvfl-i", "options": {"epochs": 1}}},  # its own head loop, one round of messages
    {"method": {"name": "ssvfl-c", "options": {"epochs": 1}}, "finetune": {"epochs": 3, "batch_size": 32}},
])
def test_the_curve_measures_without_changing_a_number_of_the_run(tiny, changes):
    plain = tiny(**changes)
    curved = tiny(**{**changes, "finetune": {**changes.get("finetune", {"epochs": 2, "batch_size": 32}), "curve": True}})
    (a,), (b,) = run(plain), run(curved)
    assert a.status == b.status == "ok"
    for name in SAME:
        assert getattr(a, name) == getattr(b, name), name  # nothing counted, drawn or learned differently
    assert a.utility_curve == ""
    points = json.loads(b.utility_curve)
    assert [p[0] for p in points] == list(range(curved.finetune.epochs))
    if b.defense not in ("mid", "embedding-dp"):  # the monitor's noise is its own (review fe F4), not inference's
        assert points[-1][2] == b.utility  # the last epoch's model is the final one
    sent = [p[1] for p in points]
    assert sent == sorted(sent) and sent[-1] == pytest.approx(b.comm_mb_pretrain + b.comm_mb_finetune)
    if b.method == "ssvfl-i":  # one round: everything is sent before the first epoch ends
        assert len(set(sent)) == 1
    else:  # split learning sends every epoch: the MB so far grows by one epoch's traffic each time
        assert sent[0] == pytest.approx(sent[-1] / len(sent))


def test_a_method_without_the_epoch_end_point_refuses_the_curve(tiny):
    with pytest.raises(IncompatibleError, match="finetune.curve: method 'oneshot'"):
        run(tiny(method={"name": "oneshot"}, finetune={"curve": True}))


def test_the_curve_off_leaves_the_keys_as_they_were_before_it_existed(tiny):
    """Stores made before finetune.curve existed resume: its default is not in the keys; on, the run is another."""
    from vflpriv.config.keys import config_hash

    plain = tiny()
    dump = plain.model_dump(mode="json", exclude={"device"})
    del dump["finetune"]["curve"]
    del dump["partition"]["canaries"], dump["finetune"]["top_depth"]  # added later too (0.2), left out at 0 alike
    del dump["finetune"]["bn_recalibrate"], dump["finetune"]["validation"]  # and later still, left out when off
    del dump["partition"]["aux_features"], dump["attack"]["adversary"], dump["attack"]["victim"]  # the feature attacks'
    del dump["finetune"]["auditor"], dump["finetune"]["auditor_options"]  # issue 48, left out when unset
    del dump["partition"]["canary_labels"]  # issue 48's pair canaries, left out when uniform
    assert plain.key() == config_hash(dump)
    curved = tiny(finetune={"epochs": 2, "batch_size": 32, "curve": True})
    assert curved.key() != plain.key() and curved.training_key() != plain.training_key()
