"""Projector and predictor MLPs used only during SSL pretraining (REFERENCE §2, FedHSSL code)."""

from __future__ import annotations

from torch import nn


def projector(in_dim: int, *, hidden: int = 512, out: int = 512) -> nn.Sequential:
    """Projector g: in -> hidden -> hidden -> out.

    Two [Linear(no bias) -> BN -> ReLU] blocks then Linear -> BN. Use ``out=128`` for MoCo.
    """
    return nn.Sequential(
        nn.Linear(in_dim, hidden, bias=False),
        nn.BatchNorm1d(hidden),
        nn.ReLU(inplace=True),
        nn.Linear(hidden, hidden, bias=False),
        nn.BatchNorm1d(hidden),
        nn.ReLU(inplace=True),
        nn.Linear(hidden, out),
        nn.BatchNorm1d(out),
    )


def predictor(dim: int = 512, *, hidden: int = 128) -> nn.Sequential:
    """Predictor h of SimSiam/BYOL (FedHSSL Table II): dim -> hidden bottleneck -> dim.

    Linear(no bias) -> BN -> ReLU -> Linear. MoCo uses no predictor (h = identity).
    """
    return nn.Sequential(
        nn.Linear(dim, hidden, bias=False),
        nn.BatchNorm1d(hidden),
        nn.ReLU(inplace=True),
        nn.Linear(hidden, dim),
    )
