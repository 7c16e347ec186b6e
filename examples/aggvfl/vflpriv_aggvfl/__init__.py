"""aggVFL: each party computes its own class logits; the active party sums them (a third-party vflpriv method).

Every party k owns a local model m_k = head_k(f_k(x_k)) that outputs C class logits. Passive parties send
their logits up (kind ``embedding``); the active party sums all parties' logits, takes the cross-entropy
and sends each passive party the gradient of the loss with respect to its logits (kind ``gradient``).
Unlike split learning there is no top model: the aggregation is a fixed sum, so the active party holds
no parameters beyond its own local model. The adversary's snapshot is its whole local model m_k.

This file is the whole plugin: it only uses vflpriv's public method API (see docs/plugins.md).
"""

from __future__ import annotations

import torch
from pydantic import Field
from torch import nn

from vflpriv.config.options import Options
from vflpriv.engine import Federation
from vflpriv.methods import Method, Trained, finetune
from vflpriv.models import build_encoder, init_parameters


class SumOfLogits(nn.Module):
    """The active party's aggregation: the sum of the parties' logits (no parameters)."""

    def forward(self, logits: list[torch.Tensor]) -> torch.Tensor:
        return torch.stack(logits).sum(0)


class AggVFLOptions(Options):
    head_hidden: int = Field(0, ge=0, description="hidden units of each party's head; 0 = one Linear layer")


class AggVFL(Method):
    """aggVFL with vflpriv's shared training loop: logits up, gradients down (split learning's traffic)."""

    Options = AggVFLOptions
    top = "sum"  # its own top: finetune.top is not read, and attacks see a sum of class logits (DLI applies)
    embedding = "classes"  # each passive party sends its C class logits, not model.out_dim units

    def _local_model(self, fed: Federation, party) -> nn.Module:
        encoder = build_encoder(party.spec, fed.model, generator=fed.generator)
        width = self.options.head_hidden
        head = (nn.Linear(encoder.out_dim, fed.num_classes) if width == 0 else
                nn.Sequential(nn.Linear(encoder.out_dim, width), nn.ReLU(), nn.Linear(width, fed.num_classes)))
        model = nn.Sequential(encoder, init_parameters(head, generator=fed.generator))
        model.out_dim = fed.num_classes
        return model.to(fed.device)

    def feature_uses(self) -> tuple[str, ...]:
        """None: it builds fresh models and trains them with the shared loop, which uses a passive party's features
        only at its hook points (declared because it overrides ``finetune``)."""
        return ()

    def label_uses(self) -> tuple[str, ...]:
        """None: it builds its models and trains them with the shared loop, which reads labels only at its hook
        points (declared because it overrides ``finetune``)."""
        return ()

    def finetune(self, fed: Federation, pretrained: list[nn.Module] | None) -> Trained:
        models = [self._local_model(fed, p) for p in fed.parties]
        return finetune(fed, models, SumOfLogits().to(fed.device))
