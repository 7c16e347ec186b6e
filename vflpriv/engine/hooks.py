"""The points in a training loop where the adversary observes or acts: explicit, documented, and called by the
loop itself (the shared finetuning loop calls every one; a method with its own loop declares in its
``supports`` which ones it calls, and the planner refuses an attack that needs another).

- ``passive_step`` (observe): passive party k has received the gradient for a batch it sent (in split learning,
  just before applying it): its bottom model as it is then (in the mode it computed the embedding in), the batch
  (global row ids) and its features, the embedding it sent and the gradient as the channel delivered it.
  Everything in it is party k's own. BLI reads the bottom and the batch (Zou et al.:
  the parameter gradient J^T G), ExPLoit the embeddings and gradients of an epoch.
- ``passive_optimizer`` (act): the optimiser passive party k trains its own parameters with. An adversary
  that replaces it (Fu et al.'s malicious optimiser) changes the trained federation, so its training is its own.

:class:`TrainingHooks` is the honest default: it records nothing and hands back the default optimiser. The
runner installs the adversary's hooks (``vflpriv.adversary``), which act for the adversary's party alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

#: Hook point names, as methods declare them in ``supports`` and attacks in what they need.
PASSIVE_STEP = "observe:passive-step"
PASSIVE_OPTIMIZER = "act:passive-optimizer"


@dataclass(frozen=True)
class PassiveStep:
    """What passive party ``party`` holds when it applies a received gradient (before its update): the batch's
    global ids and its own features of them, its bottom, the embedding it sent, the gradient it received.

    ``epoch`` counts finetuning epochs from 0 as the messages do; ``step`` numbers the exchanges of that epoch
    from 0 (with FedBCD's local updates, only the exchanges: local updates receive nothing).
    """

    party: int
    epoch: int
    step: int
    ids: torch.Tensor
    inputs: torch.Tensor
    bottom: nn.Module
    embedding: torch.Tensor
    gradient: torch.Tensor


class TrainingHooks:
    """No adversary behaviour: nothing recorded, every party's default optimiser."""

    def passive_step(self, step: PassiveStep) -> None:
        """Called by passive party ``step.party`` before it backpropagates a received gradient."""

    def passive_optimizer(self, party: int, params: list[nn.Parameter], recipe: Any, make: Callable[[], Any]) -> Any:
        """The optimiser passive party ``party`` trains ``params`` (its own) with under the finetuning ``recipe``;
        ``make()`` builds the default one."""
        return make()
