"""What crosses party lines: a typed message with kind, phase, sender, receiver and payload."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import torch

from vflpriv.common.points import EMBEDDING, GRADIENT

ACTIVE = 0
SERVER = -1

WEIGHTS = "weights"  # shared encoder parameters (FedHSSL PMA: the local top encoder)
HEAD_WEIGHTS = "head-weights"  # shared SSL head parameters (FedHSSL PMA: local projector and predictor)
STATISTICS = "statistics"  # BatchNorm running means and variances shared with weights
PROBABILITIES = "probabilities"  # few-shot VFL: the server's pseudo-labelling probability per unaligned sample

PRETRAIN = "pretrain"
FINETUNE = "finetune"
INFERENCE = "inference"

Payload = Union[torch.Tensor, dict[str, torch.Tensor]]


@dataclass(frozen=True, slots=True)
class Message:
    """One transmission. ``sample_ids`` (global training-row ids) label the rows of per-sample payloads; ``test``
    marks the test rows ``finetune.predict`` sends (they carry no training id)."""

    kind: str
    phase: str
    sender: int
    receiver: int
    payload: Payload
    sample_ids: torch.Tensor | None = None
    epoch: int = 0
    test: bool = False

    @property
    def direction(self) -> str:
        """``up`` towards the active party or the server, ``down`` away from them."""
        if self.receiver in (ACTIVE, SERVER) and self.sender not in (ACTIVE, SERVER):
            return "up"
        return "down"


def payload_bytes(payload: Payload) -> int:
    """Size on the wire of a payload (element count x element size; no device sync)."""
    if isinstance(payload, torch.Tensor):
        return payload.numel() * payload.element_size()
    return sum(t.numel() * t.element_size() for t in payload.values())


def detached(payload: Payload) -> Payload:
    """Cut the autograd graph: nothing but values crosses a party line."""
    if isinstance(payload, torch.Tensor):
        return payload.detach()
    return {name: t.detach() for name, t in payload.items()}
