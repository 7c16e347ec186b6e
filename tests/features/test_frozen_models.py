"""The adversary's own trained models in a feature view: frozen copies, made when an attack first reads one, so an
attack can change nothing of the training's models and one that reads none pays for no copy."""

from __future__ import annotations

import copy

import torch
from torch import nn

from vflpriv.runner import feature_attacking
from vflpriv.runner.feature_attacking import FrozenCopies


def test_a_read_model_is_a_frozen_copy_made_once_and_an_unread_one_is_never_copied(monkeypatch):
    bottom, top = nn.Linear(3, 2).train(), nn.Linear(4, 5).train()
    copied = []
    real = copy.deepcopy
    monkeypatch.setattr(feature_attacking.copy, "deepcopy", lambda m: copied.append(m) or real(m))
    models = FrozenCopies({"bottom": bottom, "top": top})
    assert set(models) == {"bottom", "top"} and len(models) == 2 and not copied
    read = models["bottom"]
    assert models["bottom"] is read and copied == [bottom]  # once, and only what was read
    assert not read.training and not any(p.requires_grad for p in read.parameters())
    with torch.no_grad():
        read.weight.add_(1.0)
    assert not torch.equal(read.weight, bottom.weight)  # the training's model is untouched
    assert bottom.training and all(p.requires_grad for p in bottom.parameters())
