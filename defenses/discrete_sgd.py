"""DiscreteSGD: gradients rounded to a grid (VFLAIR ``src/evaluates/defenses/defense_functions.py``, ``discrete``
and ``DiscreteSGD``; the multistep gradient of Fu et al. ``Code/possible_defenses.py`` and Kang et al.
``privacy_defense/defense_tools.py``).

VFLAIR: with W = bins + 1, the grid step of a receiving party is 2 std(G) / (W // 2), set from the first gradient
message it is sent and kept for the run; every entry is rounded to a multiple of it, G' = round(G / step) * step,
with no clipping. Fu and Kang use a fixed bound instead (step 2 bound / bins); the spread-based step needs no bound
per dataset. Strength: the number of bins B, fewer is stronger; B = +inf is the identity. Fu et al.'s grid
{6, 12, 18, 24}.
"""

from __future__ import annotations

import math

import torch

from vflpriv.common.errors import ConfigError
from vflpriv.defenses.base import Defense, StrengthAxis
from vflpriv.engine.message import Message


def discretise(tensor: torch.Tensor, *, step: float) -> torch.Tensor:
    """Every entry rounded to the nearest multiple of ``step``."""
    return torch.round(tensor / step) * step


def grid_step(tensor: torch.Tensor, *, bins: int) -> float:
    """VFLAIR's step: 2 std / ((bins + 1) // 2), from one message (std over all its entries)."""
    return 2.0 * float(tensor.float().std()) / ((bins + 1) // 2)


class DiscreteSGD(Defense):
    """Round each gradient to a grid of the strength's number of bins, the step fixed per receiver at its first."""

    default_kinds = ("gradient",)
    supported_kinds = ("gradient",)
    axis = StrengthAxis(name="bins", stronger="lower", identity=math.inf, low=1.0, high=math.inf, search=(2.0, 64.0),
                        log=True)
    audit_strengths = {"finetune": (24.0, 12.0, 6.0)}
    anchor = "VFLAIR defense_functions.py DiscreteSGD; Fu et al. possible_defenses.py; Kang et al. defense_tools.py"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        if not self.is_identity and self.strength != int(self.strength):
            raise ConfigError(f"DiscreteSGD strength is a number of bins: a whole number, got {self.strength:g}")
        self.steps: dict[int, float] = {}

    def transform(self, tensor: torch.Tensor, message: Message) -> torch.Tensor:
        step = self.steps.get(message.receiver)
        if step is None:
            step = self.steps[message.receiver] = grid_step(tensor, bins=int(self.strength))
        if step == 0.0:  # a message of zeros: nothing to round, and no step to divide by
            return tensor
        return discretise(tensor, step=step)
