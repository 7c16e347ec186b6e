"""VFL methods; each is registered by name in the ``vflpriv.methods`` entry-point group.

What a method of one's own builds on (docs/plugins.md): the base class, the finished model, the active party's
top model, the shared split-learning loop and its pieces, for methods that write a training loop of their own.

May import: common, config, store, data, models, engine.
"""

from vflpriv.methods.base import Method
from vflpriv.methods.finetune import (
    PartyOptimizers,
    TopModel,
    Trained,
    backward_with,
    finetune,
    new_top,
    predict,
    split_step,
)

__all__ = ["Method", "PartyOptimizers", "TopModel", "Trained", "backward_with", "finetune", "new_top", "predict",
           "split_step"]
