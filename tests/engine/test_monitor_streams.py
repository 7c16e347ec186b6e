"""Review fe F4: ``finetune.curve``'s monitor draws from streams forked for it, so a defense's noise in the monitor is
not the noise its next training batch or release gets, and the training's own draws stay those it makes unmeasured."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import torch

from vflpriv.engine.party import Federation


def _federation(monitor):
    method, defense = torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)
    hooks = SimpleNamespace(generators=lambda: [defense])
    channel = SimpleNamespace(muted=contextlib.nullcontext)
    return SimpleNamespace(monitor=monitor, generator=method, hooks=hooks, channel=channel), defense


def test_the_monitor_draws_other_noise_than_the_training_and_leaves_its_streams_as_they_were():
    drawn = []
    fed, defense = _federation(lambda f, epoch, bottoms, top: drawn.append(
        (torch.randn(4, generator=defense), torch.randn(4))))
    unmeasured, top = torch.randn(4, generator=torch.Generator().manual_seed(2)), torch.nn.Linear(1, 1)
    torch.manual_seed(0)
    global_next = torch.randn(4, generator=torch.Generator().manual_seed(0))
    for epoch in (0, 1):
        Federation.epoch_end(fed, epoch, [], top)
    after, global_after = torch.randn(4, generator=defense), torch.randn(4)
    assert torch.equal(after, unmeasured) and torch.equal(global_after, global_next)  # the training's draws
    (mon0, glob0), (mon1, glob1) = drawn
    assert not torch.equal(mon0, after) and not torch.equal(mon0, mon1)  # a fork per epoch, not a rewind
    assert not torch.equal(glob0, global_after) and not torch.equal(glob0, glob1)


def test_embedding_dp_s_test_row_note_says_the_curve_s_passes_are_outside_its_count(tiny):
    from vflpriv.runner.execution import run

    changes = {"defenses": [{"name": "embedding-dp", "strength": 1.0}], "finetune": {"epochs": 2, "batch_size": 32}}
    (plain,), (curved,) = run(tiny(**changes)), run(tiny(**{**changes, "finetune": {**changes["finetune"],
                                                                                      "curve": True}}))
    assert "passed embedding-dp's mechanism 1 time(s)" in curved.notes and "finetune.curve" not in plain.notes
    assert "utility_curve is outside this claim" in curved.notes and curved.utility == plain.utility
