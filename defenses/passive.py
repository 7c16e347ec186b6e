"""What a defense of a passive party's features is: the protecting party is a passive party (the victim of a feature
attack), and it acts at that party's own hook points (``vflpriv.engine.hooks``), never on a label:

- ``passive_bottom`` (:data:`PASSIVE_BOTTOM`): it wraps the bottom the party sends its finetuning and inference
  embeddings from (MID's bottleneck at the sender, a narrow layer at the cut, per-row clipping and noise); the wrapped
  module is what the party trains and holds;
- ``passive_loss`` (:data:`PASSIVE_LOSS`): a term of the party's own loss, from its features of the batch and the
  embedding it sent (NoPeek, an imagined decoder's reconstruction error), backpropagated beside the gradient it
  received; in pretraining (:data:`PRETRAIN_PASSIVE_LOSS`) from its views and its encoder's outputs, beside its SSL
  loss;
- ``passive_backward`` (:data:`PASSIVE_BACKWARD`): its backward pass (DP-SGD on its bottom).

``party`` unset protects every passive party. A defense lists the phases it acts in (``phases``, and why not in the
others); the planner refuses it in another phase, on a method that sends no passive embedding, and on a method whose
training does not call its points (``points_for``), except its ``optional_points``: points it acts at where a
method's training calls them, and whose absence leaves it nothing to act on there (``embedding-dp``'s DP-SGD of the
victim's updates from a received gradient, in a training that makes none). The planner tells each defense the points
the method's training calls (``called``).
"""

from __future__ import annotations

from typing import ClassVar

from vflpriv.common.errors import ConfigError
from vflpriv.defenses.base import Protection
from vflpriv.engine.hooks import PASSIVE_BACKWARD, PASSIVE_BOTTOM, PASSIVE_LOSS, PRETRAIN_PASSIVE_LOSS
from vflpriv.engine.message import ACTIVE, EMBEDDING, FINETUNE, INFERENCE, PRETRAIN, Message
from vflpriv.engine.roles import PASSIVE

__all__ = ["PASSIVE_BACKWARD", "PASSIVE_BOTTOM", "PASSIVE_LOSS", "PRETRAIN_PASSIVE_LOSS", "PassiveDefense"]


class PassiveDefense(Protection):
    """Base of the defenses at a passive party's points; it claims to protect that party's features."""

    secrets = frozenset({"features"})
    default_kinds: ClassVar[tuple[str, ...]] = ()
    supported_kinds: ClassVar[tuple[str, ...]] = ()
    hook_points = frozenset({PASSIVE_LOSS})
    #: The phases it acts in; ``phase_reason`` says why not in the others (the planner refuses another phase).
    phases: ClassVar[tuple[str, ...]] = (FINETUNE,)
    phase_reason: ClassVar[str] = ""
    #: Hook points it acts at where the method's training calls them, and needs not otherwise (in finetuning).
    optional_points: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        #: Its hook points the method's training calls (the planner sets them; all of them until then).
        self.called: frozenset[str] = self.hook_points
        if self.party == ACTIVE:
            raise ConfigError(f"defense '{self.name}' protects a passive party's features at its own points: party must "
                              "be a passive party (1 or more), or unset for every passive party")

    @classmethod
    def points_for(cls, phase: str) -> frozenset[str]:
        """The hook points a method's training must call for it to act in ``phase``."""
        return frozenset({PRETRAIN_PASSIVE_LOSS}) if phase == PRETRAIN else cls.hook_points - cls.optional_points

    def protects(self, message: Message) -> bool:
        return False

    def victim_problem(self, party: int, spec) -> str:
        """Why these options cannot protect ``party``'s features of ``spec`` ("" when they can): the planner refuses
        it, before any training."""
        return ""

    def guards(self, party: int, phase: str) -> bool:
        """Whether ``party`` is one it protects and ``phase`` its own (inference belongs to finetuning's model)."""
        mine = party != ACTIVE if self.party == PASSIVE else party == self.party
        return mine and (phase == self.phase or (phase == INFERENCE and self.phase == FINETUNE))

    def acts_for(self, party: int, phase: str) -> bool:
        """Whether it acts for ``party`` in ``phase``: it guards them, at a strength other than the identity."""
        return self.guards(party, phase) and not self.is_identity

    def acts_on(self, kind: str, phase: str, victim: int) -> bool:
        return kind == EMBEDDING and self.guards(victim, phase)
