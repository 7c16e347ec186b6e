"""BatchNorm running statistics re-estimated from data (label-free): the statistics a few optimiser steps leave
behind (at momentum 0.1, 20 steps keep 12% of the initial variance of 1) can be far from the data's, and eval mode
then normalises every sample by the wrong scale."""

from __future__ import annotations

import torch
from torch import nn

from vflpriv.models.training import index_batches

BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


@torch.no_grad()
def recalibrate_batchnorm(module: nn.Module, x: torch.Tensor, *, batch_size: int) -> None:
    """Replace the running statistics of every BatchNorm in ``module`` by their average over ``x`` in batches of
    ``batch_size`` (forward passes with only the BatchNorms in train mode: dropout and the weights untouched), in
    order; ``module`` keeps its mode. No BatchNorm: nothing happens."""
    norms = [m for m in module.modules() if isinstance(m, BATCH_NORMS) and m.track_running_stats]
    if not norms or x.shape[0] < 2:
        return
    was_training = module.training
    momenta = [m.momentum for m in norms]
    module.eval()
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average over the batches
        m.train()
    for batch in index_batches(torch.arange(x.shape[0], device=x.device), batch_size=batch_size, generator=None):
        module(x[batch])
    for m, momentum in zip(norms, momenta):
        m.momentum = momentum
    module.train(was_training)
