"""What a defense is: a seeded protection the protecting party applies, with a declared strength axis and the
hook points where it acts.

Hook points (``hook_points``; a reader sees at once where a defense acts, the planner refuses it where the
method's training has no such point):

- :data:`MESSAGE`: what a party sends, on the channel (:class:`Defense`: ISO, max-norm, Marvell,
  sparsification, DiscreteSGD, Gaussian DP). The channel hands it every message whose (sender, kind, phase)
  it claims and forwards what it returns.
- :data:`LABELS`: the labels the active party trains with, replaced once when the runner binds it
  (:class:`LabelDefense`: label DP by randomised response).
- inside the active party's finetuning computation (:class:`TrainingDefense`; the points of
  ``vflpriv.engine.hooks``, called by the training loop): ``ACTIVE_BATCH`` (its inputs and targets: mixup, the
  confusional autoencoder's fake labels), ``ACTIVE_MODEL`` (each received embedding inside its model: MID),
  ``ACTIVE_LOSS`` (a term of its loss: dCor), ``GRADIENT_COMPUTATION`` (how it computes the gradient it sends:
  GradPerturb), ``PREDICTIONS`` (its decoded outputs: CAE). A defense may act at several (DCAE: the
  autoencoder's points and the gradient message).
- at a passive party's own points, against feature inference (:class:`vflpriv.defenses.passive.PassiveDefense`):
  ``PASSIVE_BOTTOM`` (the bottom it sends from, wrapped: a bottleneck at the sender, clipping and noise),
  ``PASSIVE_LOSS`` (a term of its own loss: NoPeek, attacker-aware training; in pretraining too), ``PASSIVE_BACKWARD``
  (its update: DP-SGD on its bottom). The messages it sends are protected on the channel as any party's are
  (``Defense`` with ``party`` and ``kinds: [embedding]``).

Every defense is bound to the federation before training (``bind``): a defense that needs what the protecting
party holds (Marvell, the labels of each batch; MID, the width of each embedding) takes it then; a defense's own
parameters (MID's bottleneck) train with the party that owns them, and nothing they compute crosses a party line
except through the channel. The value ``axis.identity`` of the strength changes nothing, bit for bit (0 for
noise scales and weights, +inf for an epsilon or a number of bins).
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal

import torch
from pydantic import BaseModel

from vflpriv.common.errors import ConfigError
from vflpriv.common.points import LABELS, MESSAGE  # the hook points that are not the loop's: the channel, the labels
from vflpriv.config.options import NoOptions
from vflpriv.defenses.declarations import declared_read, undeclared
from vflpriv.engine.hooks import (
    ACTIVE_BATCH,
    ACTIVE_LOSS,
    ACTIVE_MODEL,
    DEFENSE_POINTS,
    GRADIENT_COMPUTATION,
    PREDICTIONS,
    DefensePoints,
)
from vflpriv.engine.message import ACTIVE, Message, Payload
from vflpriv.engine.roles import PASSIVE, role

if TYPE_CHECKING:
    from vflpriv.engine.party import Federation


__all__ = ["ACTIVE_BATCH", "ACTIVE_LOSS", "ACTIVE_MODEL", "DEFENSE_POINTS", "GRADIENT_COMPUTATION", "LABELS",
           "MESSAGE", "PREDICTIONS", "Defense", "LabelDefense", "Protection", "StrengthAxis", "TrainingDefense"]


@dataclass(frozen=True)
class StrengthAxis:
    """What the swept number means: its name, which direction protects more, its no-op value and range."""

    name: str = "lambda"
    stronger: Literal["higher", "lower"] = "higher"
    identity: float = 0.0
    low: float = 0.0
    high: float = math.inf
    #: Where ``vflpriv tune`` searches by default, and whether on a log scale.
    search: tuple[float, float] = (0.01, 100.0)
    log: bool = True

    def check(self, *, value: float, defense: str) -> None:
        """Raise ConfigError when ``value`` is outside [low, high]."""
        if not self.low <= value <= self.high:
            raise ConfigError(
                f"defense '{defense}': strength ({self.name}) must lie in [{self.low:g}, {self.high:g}], got {value:g}"
            )


class Protection(DefensePoints, ABC):
    """Base of every registered defense: strength on ``axis``, protecting party, phase, kinds, hook points. It
    inherits the active party's points as identities and overrides those it acts at."""

    Options: ClassVar[type[BaseModel]] = NoOptions
    #: Where it acts (see the module docstring).
    hook_points: ClassVar[frozenset[str]] = frozenset({MESSAGE})
    #: The published defense it follows (``vflpriv describe`` prints it).
    anchor: ClassVar[str] = ""
    #: Where it pays against its simpler alternative, as measured (``vflpriv describe`` prints it; '' unmeasured).
    pays: ClassVar[str] = ""
    default_kinds: ClassVar[tuple[str, ...]] = ("gradient",)
    supported_kinds: ClassVar[tuple[str, ...]] = ("gradient",)
    axis: ClassVar[StrengthAxis] = StrengthAxis()
    binary_only: ClassVar[bool] = False
    #: Strengths a quick audit sweeps, per phase, from weak to strong (``vflpriv audit``); a phase not
    #: listed has no default and must be given in the audit's config.
    audit_strengths: ClassVar[dict[str, tuple[float, ...]]] = {}
    #: Raised when the defense's mechanism changes under its name: the runs of each revision have keys of their own,
    #: so a store of an earlier revision's records is recomputed, not resumed (0: the first; left out of the keys).
    revision: ClassVar[int] = 0
    #: The secrets it claims to protect (``labels``, ``features``): the audit runs it against the label attacks when
    #: it claims labels, and against a feature attack wherever it acts on what that attack reads (:meth:`acts_on`).
    secrets: ClassVar[frozenset[str]] = frozenset({"labels"})
    #: What it costs beside the utility it takes (the extra computation per training step), for ``describe``.
    cost: ClassVar[str] = ""
    #: Strengths the audit sweeps, per phase, weak to strong, for the defense on a passive party's embeddings
    #: (``kinds: [embedding]``) against the feature attacks, where it supports that kind without defaulting to it
    #: (ISO, gaussian-message, sparsify); none: the audit does not add that configuration.
    embedding_audit_strengths: ClassVar[dict[str, tuple[float, ...]]] = {}
    #: Whether what it does depends on the active party's labels (Marvell's noise follows each batch's labels; dCor's
    #: and PELoss's loss terms, mixup's and CAE's targets): it then releases them around a mechanism that bounds only
    #: its own use of them (dp-gaussian), and the planner refuses the pair unless a label defense randomised the
    #: labels first. A label defense's randomisation is its mechanism, not such a read.
    reads_labels: ClassVar[bool] = False
    #: Whether what it does depends on a passive party's features (a plugin's, declared in its own class): a feature
    #: claim beside it (embedding-dp) bounds only its own mechanism, so it then records no epsilon.
    reads_features: ClassVar[bool] = False

    @classmethod
    def label_reads(cls) -> tuple[str, ...]:
        """Why it reads the active party's labels, one clause each (``()``: it does not): declared (``reads_labels``),
        or code not vflpriv's own without ``reads_labels`` declared beside it (:meth:`undeclared_reads`)."""
        return ("it reads them (reads_labels)",) * declared_read(cls, "reads_labels") + cls.undeclared_reads("labels")

    @classmethod
    def feature_reads(cls) -> tuple[str, ...]:
        """Why it reads a passive party's features, one clause each (``()``: it does not), as :meth:`label_reads`."""
        reads = ("it reads them (reads_features)",) * declared_read(cls, "reads_features")
        return reads + cls.undeclared_reads("features")

    @classmethod
    def undeclared_reads(cls, secret: str) -> tuple[str, ...]:
        """The class's code that is not vflpriv's own without ``reads_labels`` (``reads_features``) declared beside it,
        as one clause: taken to read the ``secret`` (fail closed, as ``Method.undeclared_label_uses``)."""
        return undeclared(cls, f"reads_{secret}", secret[:-1])

    @classmethod
    def default_kinds_for(cls, phase: str) -> tuple[str, ...]:
        """The kinds protected when none are given, in ``phase``."""
        return cls.default_kinds

    @classmethod
    def default_strengths(cls, phase: str) -> tuple[float, ...]:
        """What a sweep of ``phase`` sweeps when given no strengths (evaluate, sweep), weak to strong on the
        defense's own axis: its audit strengths for the phase, else three points spanning its search range (log-spaced
        where the axis is)."""
        if phase in cls.audit_strengths:
            return tuple(cls.audit_strengths[phase])
        lo, hi = cls.axis.search
        points = [lo, math.sqrt(lo * hi), hi] if cls.axis.log and lo > 0 else [lo, (lo + hi) / 2, hi]
        return tuple(points if cls.axis.stronger == "higher" else points[::-1])

    @classmethod
    def audit_strengths_for(cls, phase: str, *, finetune, options: dict) -> tuple[float, ...] | None:
        """The strengths the audit sweeps in ``phase`` for a run finetuned by ``finetune`` with the defense's
        ``options`` (default: :attr:`audit_strengths`; dp-gaussian solves its noise for its audit claims), or None."""
        found = cls.audit_strengths.get(phase)
        return tuple(found) if found is not None else None

    @classmethod
    def claimed_epsilon(cls, strength: float, *, finetune, options: dict) -> tuple[float, float] | None:
        """The (epsilon, delta) a run at ``strength`` will claim, where planning can know it (label DP: its strength;
        dp-gaussian: its accountant over the run's updates), else None: the audit plants enough canaries to test it."""
        return None

    @classmethod
    def own_strength_option(cls, options: dict) -> str:
        """The option of ``options`` that sets the strength itself (a sweep then has nothing to sweep), or ''."""
        return ""

    @classmethod
    def refusal(cls, strength: float, options: BaseModel) -> str:
        """Why the defense refuses this strength beside these (parsed) options, or '': checked as it is built, and
        where a record of it is read (``runner.naming.refused``)."""
        return ""

    @property
    def effective_strength(self) -> float:
        """The strength it acts at, on its axis (where an option sets it, the value it resolved to)."""
        return self.strength

    def __init__(
        self,
        *,
        strength: float,
        party: int | str,
        phase: str,
        kinds: list[str] | None,
        options: BaseModel,
        generator: torch.Generator,
        name: str = "",
    ):
        #: The name it is registered and configured under (errors name it as the user wrote it).
        self.name = name or type(self).__name__
        kinds = list(kinds) if kinds is not None else list(self.default_kinds_for(phase))
        unsupported = sorted(set(kinds) - set(self.supported_kinds))
        if unsupported:
            raise ConfigError(
                f"defense '{self.name}' cannot protect {', '.join(unsupported)} messages; "
                f"valid kinds: {', '.join(self.supported_kinds)}"
            )
        self.axis.check(value=float(strength), defense=self.name)
        self.strength = float(strength)
        self.party = party
        self.phase = phase
        self.kinds = frozenset(kinds)
        self.options = options
        self.generator = generator
        #: Why the defense's privacy claim does not cover the method it protects ('' where it does): set by the planner
        #: from :meth:`covers`; then no epsilon is recorded, and the run's notes say why.
        self.uncovered = ""
        #: Why another defense of the training reads the secret around this one's mechanism ('' where none does): set by
        #: the planner; part of :attr:`uncovered`, and it voids any narrower claim too.
        self.read_around = ""

    @property
    def is_identity(self) -> bool:
        return self.strength == self.axis.identity

    def generators(self) -> list[torch.Generator]:
        """Its one seeded stream (``defense:INDEX``), for a measurement to restore."""
        return [self.generator]

    def bind(self, federation: Federation) -> None:
        """Called once by the runner after the federation is built, before any training; default: nothing."""

    @abstractmethod
    def protects(self, message: Message) -> bool:
        """Whether the channel must pass ``message`` through this defense."""

    @classmethod
    def shared_state(cls, *, strength: float | None, options: dict) -> str | None:
        """A name for costly state this defense builds once (in ``bind``, through the cache) and every run with the
        same ``strength`` and ``options`` shares, or None (the default). The scheduler starts one training per
        state first, so parallel workers do not wait on each other's (the CAE autoencoder)."""
        return None

    @classmethod
    def incompatible(cls, *, dataset) -> str:
        """Why the defense cannot protect a task on ``dataset`` (beyond ``binary_only``; the planner refuses it)."""
        return ""

    def privacy_spent(self) -> float | None:
        """The epsilon this defense spent in the training (a DP defense with an accountant), or None (no claim)."""
        return None

    def privacy_delta(self) -> float:
        """The delta of the claim :meth:`privacy_spent` makes (0: pure epsilon)."""
        return 0.0

    def acts_on(self, kind: str, phase: str, victim: int) -> bool:
        """Whether it acts on what a feature attack on party ``victim`` reads, the ``kind`` messages that party sends
        in ``phase``: on those messages (the channel), or on each received embedding inside the active party's model
        or loss (MID, dCor, PELoss, FedPass: the gradient the victim trains with passes through it). The audit runs a
        feature attack under the defenses that act on what it reads, whatever secret they claim."""
        receiver = ACTIVE if victim != ACTIVE else 1
        if self.protects(Message(kind, phase, victim, receiver, torch.empty(0))):
            return True
        inside = self.hook_points & {ACTIVE_MODEL, ACTIVE_LOSS}
        return bool(inside) and kind == "embedding" and victim != ACTIVE and phase == self.phase

    def covers(self, method) -> str:
        """'' where the privacy claim (``privacy_spent``) holds for everything ``method`` does with the secret it
        protects, else why it does not; a defense that claims nothing covers everything."""
        return ""

    def covers_data(self, dataset) -> str:
        """'' where a features claim's relation holds on ``dataset``, else why not: a preprocessing fitted on the
        training rows (``VerticalDataset.fitted_features``; undeclared: fail closed) moves every row with one sample."""
        declared = dataset.fitted_features
        if "features" not in self.secrets:
            return ""
        if declared is None:
            return f"dataset {dataset.name} declares no fitted_features (a fitted preprocessing?): no feature epsilon"
        parties = range(1, dataset.parties) if self.party == PASSIVE else [self.party]
        fitted = [f"party {p}'s features are {declared[p]}" for p in parties if declared[p]]
        return (f"{dataset.name}: {'; '.join(fitted)}, so one sample's raw features move every row (outside the "
                "replace-one relation): no feature epsilon") if fitted else ""

    def notes(self) -> str:
        """What the run's notes say about its claim after training beyond the epsilon (a narrower claim that holds
        where the training's does not), or ''."""
        return ""

    def requested_claim(self) -> str:
        """The option by which the configuration asks for the claim itself (dp-gaussian's ``options.target_epsilon``),
        or ''. Where :meth:`covers` says the claim does not hold for the method, such a run is refused in planning
        (the user asked for an epsilon it cannot have); without it the run goes on and records no epsilon."""
        return ""


class Defense(Protection):
    """A message defense; subclasses implement ``transform`` on one tensor."""

    def protects(self, message: Message) -> bool:
        """Depends only on (sender, kind, phase): the channel caches the answer per triple. ``party`` is a
        party index or ``"passive"`` (every passive party protects what it sends)."""
        sender = role(message.sender) if self.party == PASSIVE else message.sender
        return sender == self.party and message.phase == self.phase and message.kind in self.kinds

    def __call__(self, payload: Payload, message: Message) -> Payload:
        if self.is_identity:
            return payload
        if isinstance(payload, torch.Tensor):
            return self.transform(payload, message)
        return {name: self.transform(t, message) for name, t in payload.items()}

    @abstractmethod
    def transform(self, tensor: torch.Tensor, message: Message) -> torch.Tensor:
        """The protected version of one tensor of ``message``."""


class LabelDefense(Protection):
    """A defense on the active party's training labels, applied once at ``bind``; never on the channel (hook point
    :data:`LABELS`).

    The labels are replaced for the whole run, so every phase that trains with labels (finetuning,
    VFLHLP's supervised pretraining) sees the protected ones; ``phase`` does not restrict it.
    """

    default_kinds = ("labels",)
    supported_kinds = ("labels",)
    hook_points = frozenset({LABELS})

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        if self.party != ACTIVE:
            raise ConfigError(f"defense '{self.name}' protects the active party's labels: party must be {ACTIVE}")

    def protects(self, message: Message) -> bool:
        return False

    def bind(self, federation: Federation) -> None:
        """Replace the active party's known labels (entries >= 0) by ``relabel`` of them."""
        if self.is_identity:
            return
        active = federation.active
        known = active.labels >= 0
        labels = active.labels.clone()
        labels[known] = self.relabel(active.labels[known], num_classes=federation.num_classes)
        self.replace_labels(federation, labels)

    @staticmethod
    def replace_labels(federation: Federation, labels: torch.Tensor, soft: torch.Tensor | None = None, *,
                       label_ids: torch.Tensor | None = None) -> None:
        """The active party trains with ``labels`` from now on (and, where given, the probability rows ``soft`` as
        its targets: :data:`SOFT_LABELS`; ``label_ids``: the ids it keeps labeled, where it drops some)."""
        extra = {} if soft is None else {"soft_labels": soft}
        if label_ids is not None:
            extra["label_ids"] = label_ids
        federation.parties[ACTIVE] = dataclasses.replace(federation.active, labels=labels, **extra)

    @abstractmethod
    def relabel(self, labels: torch.Tensor, *, num_classes: int) -> torch.Tensor:
        """The protected labels for ``labels`` (all in 0..num_classes-1)."""


class TrainingDefense(Protection):
    """A defense of the active party inside its finetuning computation, at the points of ``vflpriv.engine.hooks``
    it lists in ``hook_points`` (and overrides). It acts in finetuning only (where there are labels to protect),
    for the active party; a method whose training does not call its points refuses it. With :data:`MESSAGE`
    among its points it also transforms the gradients the active party sends (``transform``)."""

    default_kinds: ClassVar[tuple[str, ...]] = ()
    supported_kinds: ClassVar[tuple[str, ...]] = ()

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        if self.party != ACTIVE:
            raise ConfigError(f"defense '{self.name}' acts inside the active party's training: party must be {ACTIVE}")
        if self.phase != "finetune":
            raise ConfigError(f"defense '{self.name}' acts in finetuning, which has the labels it protects; "
                              "pretraining has none")
        self.num_classes = 0

    def bind(self, federation: Federation) -> None:
        """Learn the task's number of classes (one-hot targets, per-class gradients); call it when overriding."""
        self.num_classes = federation.num_classes

    def protects(self, message: Message) -> bool:
        return MESSAGE in self.hook_points and message.sender == ACTIVE and message.phase == self.phase \
            and message.kind in self.kinds

    def __call__(self, payload: Payload, message: Message) -> Payload:
        if self.is_identity:
            return payload
        return self.transform(payload, message)

    def transform(self, tensor: torch.Tensor, message: Message) -> torch.Tensor:
        """The gradient message as sent, for a defense with :data:`MESSAGE` among its points."""
        return tensor
