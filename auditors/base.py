"""What an auditor is: the adversary of a DP audit, instantiated as in Nasr et al. 2021 ("Adversary Instantiation:
Lower Bounds for Differentially Private Machine Learning", S&P 2021), to test a DP defense's claimed epsilon with the
most power its threat model allows, not to measure what a party of the federation can infer.

An attack gets a passive party's view and what it infers is leakage; an auditor holds what DP's guarantee is stated
against and no party holds (``privileges``: every label but the canaries', the initial state, every intermediate state
of the training), so its guesses bound the claim from below and nothing else: the runner binds it only to a run that
names it (``finetune.auditor``; ``vflpriv audit`` attaches one to each defended training whose defense it audits, with
canaries), hands it the active party's private updates through the engine's hook point ``audit:active-update``, scores
its guesses of the random-label canaries against their drawn labels, and records them apart, in the records'
``auditor_*`` fields: they enter no leakage, CAP, verdict or worst case over the attacks, only the canary audit's
check of the claim (``vflpriv.tradeoff.auditing``).

Extending it: subclass :class:`Auditor`, declare ``privileges``, ``threat_model`` and the defenses it ``audits``, and
register it under the entry-point group ``vflpriv.auditors``.

Trust: an auditor is measurement code the user installs, like the runner, not an adversary held at arm's length. It
is bound to the live defense (its sigma, clip and options; also its noise stream, which a dishonest auditor could
replay to audit at sigma 0). The engine checks what it can: an :class:`AuditRead` naming a canary's row is refused,
since the defense would compute that row's gradient from the hidden label, and so is one naming rows outside the
batch, negative, repeated or non-integer, or handed back from an earlier update (``vflpriv.engine.audit_guard``),
each with the auditor's class named; the rest is the auditor's own code, whose
errors can only make a correct mechanism look broken (a claim rejected), never a broken one look correct.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import torch
from pydantic import BaseModel

from vflpriv.common.empirical_epsilon import KEEP
from vflpriv.config.options import NoOptions
from vflpriv.engine.hooks import AUDIT_UPDATE, ActiveUpdate, AuditRead


class Auditor(ABC):
    """Guesses the canaries' labels of one training with the privileges it declares; the runner scores the guesses."""

    Options: ClassVar[type[BaseModel]] = NoOptions
    #: What it reads beyond a passive party's view (``vflpriv describe`` prints them).
    privileges: ClassVar[tuple[str, ...]] = ()
    #: Which of Nasr et al.'s adversaries it instantiates, and against what.
    threat_model: ClassVar[str] = ""
    anchor: ClassVar[str] = ""

    def __init__(self, options: BaseModel):
        self.options = options

    @classmethod
    @abstractmethod
    def audits(cls, defense: type) -> bool:
        """Whether it can test the claim of the defense class ``defense``."""

    @abstractmethod
    def bind(self, defense, *, labels: torch.Tensor, canaries: torch.Tensor, classes: int,
             candidates: torch.Tensor | None = None) -> None:
        """Called once before training: the audited ``defense`` (bound), the labels the active party trains with where
        they are no canary's (-1 elsewhere; on the training's device), the canaries' global ids (sorted), the number
        of classes and, per canary, the public classes its label was drawn from (canaries x C; None: every class).
        Never the federation, whose active party holds the canaries' labels."""

    def hook_points(self) -> frozenset[str]:
        """The shared loop's audit points it needs (the planner refuses a method that does not call one)."""
        return frozenset({AUDIT_UPDATE})

    def refuses(self, config, *, classes: int) -> str:
        """Why it cannot audit a training of ``config`` (a TrainingConfig; ``classes`` labels), '' where it can."""
        return ""

    def audit_embeddings(self, ids: torch.Tensor, local: list[torch.Tensor], top: torch.nn.Module
                         ) -> list[torch.Tensor]:
        """Hook point ``audit:passive-embeddings``: the parties' embeddings of the batch ``ids`` before they are sent;
        returns what is sent (an auditor that crafts its canaries' inputs replaces their rows)."""
        return local

    def audit_update(self, update: ActiveUpdate) -> AuditRead | None:
        """Hook point ``audit:active-update``: read the active party's state before a private update; return what to
        call once the update is released and the rows whose clipped sum it wants from the defense (None: nothing to
        read in this one)."""
        return None

    def menu(self) -> tuple[float, ...]:
        """The shares of its most confident guesses its scoring keeps, fixed before any guess is scored (the
        abstention menu, Bonferroni-corrected over its entries: ``vflpriv.common.empirical_epsilon``)."""
        return KEEP

    @abstractmethod
    def guesses(self) -> tuple[torch.Tensor, torch.Tensor]:
        """After training: per canary (in the order of ``canaries``), its guessed label and how sure it is."""
