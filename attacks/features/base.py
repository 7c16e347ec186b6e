"""What a feature attack is: it reads a :class:`FeatureView` and returns a :class:`Reconstruction` per target set.

The view holds the per-sample rows the adversary received from its victim (the first kind of ``observes`` that the
method sends that role in the attacked phase: embeddings, or the gradients a passive party receives about the active
party), its own features and models, and the victim's features of its known samples only. A tuned feature attack
selects its options on a held-out quarter of those known samples (``vflpriv.attacks.search``), never on a target.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

from vflpriv.attacks.base import Attack
from vflpriv.engine import EMBEDDING, GRADIENT
from vflpriv.engine.adversary import FeatureView, Reconstruction

__all__ = ["FeatureAttack", "FeatureView", "Reconstruction"]


class FeatureAttack(Attack):
    """Base of registered feature-inference attacks."""

    secret: ClassVar[str] = "features"
    roles: ClassVar[frozenset[str]] = frozenset({"active", "passive", "server"})
    #: The per-sample message kinds it reconstructs from, in order of preference.
    observes: ClassVar[tuple[str, ...]] = (EMBEDDING, GRADIENT)
    #: It needs no auxiliary labels (its auxiliary knowledge is ``partition.aux_features``).
    needs_aux: ClassVar[bool] = False

    @abstractmethod
    def infer(self, view: FeatureView) -> dict[str, Reconstruction]:
        """Reconstruct the victim's features of every target set of ``view`` (``view.targets``)."""
