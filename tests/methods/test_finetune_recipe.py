"""The finetuning recipe's parts (FinetuneConfig): per-party clipping, cosine schedule, SGD momentum."""

from __future__ import annotations

import math

import pytest
import torch

from vflpriv.config.schema import FinetuneConfig
from vflpriv.methods.finetune import PartyOptimizers


def _parties(seed: int = 0) -> list[list[torch.nn.Parameter]]:
    g = torch.Generator().manual_seed(seed)
    return [[torch.nn.Parameter(torch.randn(5, 3, generator=g)), torch.nn.Parameter(torch.randn(3, generator=g))],
            [torch.nn.Parameter(torch.randn(4, 2, generator=g))]]


def test_each_party_clips_its_own_gradient_norm_before_its_step() -> None:
    """SGD lr 1 without momentum or decay moves each party by exactly its clipped gradient: norm = clip."""
    owned = _parties()
    before = [[p.detach().clone() for p in ps] for ps in owned]
    cfg = FinetuneConfig(optimizer="sgd", lr=1.0, momentum=0.0, weight_decay=0.0, grad_clip=2.0)
    optimizers = PartyOptimizers(cfg, owned)
    for ps, scale in zip(owned, (100.0, 0.01)):
        for p in ps:
            p.grad = torch.full_like(p, scale)
    optimizers.step()
    moved = [torch.cat([(b - p.detach()).flatten() for b, p in zip(bs, ps)]).norm() for bs, ps in zip(before, owned)]
    assert moved[0].item() == pytest.approx(2.0, rel=1e-5)  # clipped to 2
    assert moved[1].item() == pytest.approx(0.01 * math.sqrt(8), rel=1e-5)  # below the clip: untouched


def test_cosine_schedule_follows_cosine_annealing_per_epoch_and_constant_stays() -> None:
    epochs = 5
    cosine = PartyOptimizers(FinetuneConfig(optimizer="sgd", lr=0.03, schedule="cosine", epochs=epochs), _parties())
    constant = PartyOptimizers(FinetuneConfig(optimizer="sgd", lr=0.03, epochs=epochs), _parties())
    reference = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.03)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(reference, epochs)
    for epoch in range(epochs):
        cosine.start_epoch(epoch)
        constant.start_epoch(epoch)
        for opt in cosine.optimizers:
            assert opt.param_groups[0]["lr"] == pytest.approx(scheduler.get_last_lr()[0])
        assert all(opt.param_groups[0]["lr"] == 0.03 for opt in constant.optimizers)
        reference.step()
        scheduler.step()


def test_sgd_momentum_comes_from_the_config() -> None:
    optimizers = PartyOptimizers(FinetuneConfig(optimizer="sgd", momentum=0.5), _parties())
    assert {opt.param_groups[0]["momentum"] for opt in optimizers.optimizers} == {0.5}


def test_frozen_parameters_and_parties_without_any_get_no_optimiser() -> None:
    owned = _parties()
    owned[1][0].requires_grad_(False)
    assert len(PartyOptimizers(FinetuneConfig(), owned).optimizers) == 1
