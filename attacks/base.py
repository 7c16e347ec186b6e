"""What an attack is and what it may see.

An attack receives an :class:`AdversaryView`: the adversary party's own features, its encoder
snapshot for the attacked phase, the messages it received, and its auxiliary labels. The view has
no field holding its targets' labels, so an attack cannot read them; the runner scores its output.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from pydantic import BaseModel

from vflpriv.adversary import AdversaryView, Inference
from vflpriv.options import NoOptions

__all__ = ["AdversaryView", "Attack", "Inference"]


class Attack(ABC):
    """Base of registered label-inference attacks."""

    Options: ClassVar[type[BaseModel]] = NoOptions
    needs_encoder: ClassVar[bool] = False
    needs_messages: ClassVar[tuple[tuple[str, str], ...]] = ()
    binary_only: ClassVar[bool] = False
    #: Whether the attack needs the adversary's auxiliary labels (refused with ``partition.aux=0``).
    needs_aux: ClassVar[bool] = True
    #: Options of a quick audit (``vflpriv audit``) where the defaults are too slow for many trainings.
    audit_options: ClassVar[dict] = {}

    def __init__(self, options: BaseModel):
        self.options = options

    def required_messages(self, phase: str) -> tuple[tuple[str, str], ...]:
        """(kind, phase) pairs the adversary must receive for this attack on ``phase``: the runner
        refuses (in ``plan``) a method that sends none of them and records them in the inbox, with
        ``needs_messages`` (pairs recorded whatever the attacked phase)."""
        return ()

    @abstractmethod
    def infer(self, view: AdversaryView) -> dict[str, Inference]:
        """Guess the labels of (some of) ``view.targets``; keys are target set names."""
