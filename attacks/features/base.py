"""What a feature attack is: it reads a :class:`FeatureView` and returns a :class:`Reconstruction` per target set.

The view holds the per-sample rows the adversary received from its victim (the first kind of ``observes`` that the
method sends that role in the attacked phase: embeddings, or the gradients a passive party receives about the active
party), its own features and models, and the victim's features of its known samples only. A tuned feature attack
selects its options on a held-out quarter of those known samples (``vflpriv.attacks.search``), never on a target.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

from pydantic import Field

from vflpriv.attacks.base import Attack
from vflpriv.config.options import Options
from vflpriv.data.base import PartySpec
from vflpriv.engine import EMBEDDING, GRADIENT
from vflpriv.engine.adversary import FeatureView, Reconstruction

__all__ = ["FeatureAttack", "FeatureOptions", "FeatureView", "Reconstruction"]


class FeatureOptions(Options):
    """Options every feature attack has: whether its records get the image scores."""

    image_metrics: bool | None = Field(
        None, description="score PSNR and SSIM (images only); unset: for image victims")


class FeatureAttack(Attack):
    """Base of registered feature-inference attacks."""

    secret: ClassVar[str] = "features"
    roles: ClassVar[frozenset[str]] = frozenset({"active", "passive", "server"})
    #: The per-sample message kinds it reconstructs from, in order of preference.
    observes: ClassVar[tuple[str, ...]] = (EMBEDDING, GRADIENT)
    #: It needs no auxiliary labels (its auxiliary knowledge is ``partition.aux_features``).
    needs_aux: ClassVar[bool] = False
    #: One kind for the quick audit: every feature attack reconstructs the victim's features from what it received.
    kind: ClassVar[str] = "feature reconstruction"

    def victim_problem(self, spec: PartySpec) -> str:
        """Why these options cannot attack a victim of ``spec`` ("" when they can): the planner refuses it."""
        if getattr(self.options, "image_metrics", None) and spec.modality != "image":
            return "attack.options.image_metrics: PSNR and SSIM score images; the victim's features are tabular"
        return ""

    def known_needed(self, *, tuned: bool) -> tuple[int, str]:
        """The fewest known samples these options learn from, and why (the planner refuses a partition with fewer)."""
        return 2, "it learns its reconstruction from at least 2 known samples"

    def image_scores(self, spec: PartySpec) -> bool:
        """Whether its records get PSNR and SSIM."""
        wanted = getattr(self.options, "image_metrics", None)
        return spec.modality == "image" and len(spec.shape) == 3 and wanted is not False

    @abstractmethod
    def infer(self, view: FeatureView) -> dict[str, Reconstruction]:
        """Reconstruct the victim's features of every target set of ``view`` (``view.targets``)."""
