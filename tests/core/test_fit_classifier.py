"""fit_classifier: every training step runs in train mode (BN batch statistics), also after a per-epoch callback that
evaluates in eval mode; the model is returned in eval mode."""

import torch
from torch import nn

from vflpriv.models.training import fit_classifier


def test_every_training_step_is_in_train_mode_around_eval_callbacks():
    g = torch.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))
    modes: list[bool] = []
    model.register_forward_hook(lambda m, _i, _o: modes.append(m.training) if torch.is_grad_enabled() else None)
    callbacks: list[bool] = []
    x, y = torch.randn(20, 4, generator=g), torch.arange(20) % 2
    fit_classifier(model, x, y, epochs=3, lr=0.01, weight_decay=0.0, batch_size=8, generator=g,
                   on_epoch=lambda _e, m: callbacks.append(m.training))
    assert callbacks == [False, False, False]
    assert len(modes) == 9 and all(modes)  # 20 samples in batches of 8 (8, 8, 4), three epochs
    assert not model.training
