"""What a VFL method is: optional pretraining, then finetuning, written only against the federation."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, ClassVar

import torch
from pydantic import BaseModel
from torch import nn

from vflpriv.common.declarations import assigned_since, keep_defined, uncovered_code, undeclared_clause
from vflpriv.config.options import NoOptions
from vflpriv.engine import (
    AUDIT_EMBEDDINGS,
    AUDIT_UPDATE,
    DEFENSE_POINTS,
    EMBEDDING,
    EPOCH_END,
    PASSIVE_OPTIMIZER,
    PASSIVE_POINTS,
    PASSIVE_STEP,
    PRETRAIN,
    SOFT_LABELS,
    SOFT_TARGETS,
    SPLIT_LEARNING,
    WEIGHTS,
    Federation,
    Traffic,
    passive_receives,
)
from vflpriv.methods.finetune import Trained, finetune, predict, split_model
from vflpriv.methods.towers import build_local_encoder
from vflpriv.models.encoders import build_encoder

if TYPE_CHECKING:
    from vflpriv.config.schema import ModelConfig
    from vflpriv.data.base import PartySpec


#: Everything the shared finetuning loop honours: each ``finetune.top``, FedBCD's ``finetune.local_updates``,
#: and every hook point it calls (``vflpriv.engine.hooks``: the adversary's and the defenses').
SHARED_LOOP: frozenset[str] = frozenset({"top:linear", "top:mlp", "top:sum", "local-updates", PASSIVE_STEP,
                                         PASSIVE_OPTIMIZER, EPOCH_END, SOFT_LABELS, SOFT_TARGETS,
                                         AUDIT_UPDATE, AUDIT_EMBEDDINGS, *DEFENSE_POINTS, *PASSIVE_POINTS})


#: The label use of a pretraining that reads labels (``pretrain_reads_labels``).
PRETRAINING_READS_LABELS = "its pretraining reads labels"


#: What a method's class may define without declaring its uses beside it: the declarations themselves and what no
#: federation reaches (the options, the adversary's no-federation prior, the instance's attribute dictionary); its
#: own ``__init__``, ``supported``, ``declared``, ``passive_receives`` and ``can_pretrain_alone`` are code (they run
#: before and during planning: review fin F5).
DECLARATIONS = frozenset({"Options", "label_uses", "feature_uses", "pretrain_alone", "alone_skeleton", "__dict__",
                          "__weakref__"})


def own_code(method: Method | type, than: str) -> list[str]:
    """The code a method may run that its effective ``than`` (``label_uses``, ``feature_uses``: the first class of the
    MRO defining it) does not cover, as ``Class.name()``: fail closed, every function of a class the declaring class
    does not inherit from (a helper a declared method calls counts as much as ``finetune``; a mixin's code after the
    declaring class or a declaration in a mixin before a class with code are not covered), a metaclass's code, and
    callables set on the instance (``self.fresh_bottoms = ...`` in ``__init__``), and a vflpriv class's members
    assigned since its module defined them (``VFLHLP.pretrain_reads_labels = False`` at a plugin's import)."""
    cls = method if isinstance(method, type) else type(method)
    found = uncovered_code(cls, than, exempt=DECLARATIONS) + [f"{name} (assigned since vflpriv defined it)"
                                                              for k in cls.__mro__ for name in assigned_since(k)]
    if not isinstance(method, type):
        found += [f"self.{name}" for name, value in vars(method).items() if callable(value)]
    return found


def pretraining_reads_labels(method: Method | type) -> bool:
    """Whether a method's pretraining may read the labels: declared (``pretrain_reads_labels``) or, fail closed, code
    of its own without ``label_uses`` declared beside it (:func:`own_code`; reviews eps F1, eps2 G6)."""
    cls = method if isinstance(method, type) else type(method)
    return cls.pretrain_reads_labels or bool(own_code(method, "label_uses"))


def _undeclared(method: Method, than: str, what: str) -> tuple[str, ...]:
    """One clause naming the method's own code without ``than`` declared beside it, or ``()``."""
    return undeclared_clause(own_code(method, than), f"declares no {what} uses beside it (Method.{than}), so what it "
                                                     f"does with the {what}s outside the shared loop is unknown")


class Method:
    """Base of registered methods.

    ``pretrain`` returns one encoder per party as each party holds it after pretraining (for
    FedHSSL: cross and local encoders pooled), or ``None`` for methods without pretraining. Its
    output is cached by the runner, so it must depend only on the federation and the options.
    ``finetune`` starts from those encoders (or fresh ones) and runs the shared split-learning loop.
    The adversary's snapshot of a phase is its entry of ``pretrain``'s list (pretrain) or of
    ``Trained.bottoms`` (finetune).
    """

    Options: ClassVar[type[BaseModel]] = NoOptions
    pretrains: ClassVar[bool] = False
    #: Whether pretraining reads labels; if not, the pretraining cache ignores the label budget and aux set.
    pretrain_reads_labels: ClassVar[bool] = False
    #: Every message the method sends, as (sender role, kind, phase); the channel refuses any other, the
    #: planner refuses defenses and attacks on messages never sent (see ``vflpriv.engine.roles``).
    sends: ClassVar[Traffic] = SPLIT_LEARNING
    #: Whether parties exchange anything at all; a non-federated reference (one party alone, or all
    #: features pooled) has no adversary, so its attack records say "not applicable".
    federated: ClassVar[bool] = True
    #: The VFLHLP setting (the active party knows the labels of all its local samples) when the partition
    #: leaves ``active_labels_local`` unset; ``requires_active_labels_local`` refuses it set off.
    default_active_labels_local: ClassVar[bool] = False
    #: Raised when the method's algorithm changes under its name: each revision's runs have keys of their own, so a
    #: store of an earlier revision's records is recomputed, not resumed (0: the first; left out of the keys).
    revision: ClassVar[int] = 0
    requires_active_labels_local: ClassVar[bool] = False
    #: What of the shared finetuning loop the method honours (:data:`SHARED_LOOP` when it finetunes with it):
    #: ``top:linear|mlp|sum``, ``local-updates``, and the hook points its training calls; the planner refuses
    #: a setting or an attack needing anything else. A method with its own loop declares what it calls.
    supports: ClassVar[frozenset[str]] = SHARED_LOOP
    #: Why its training calls no such point, for a hook point it lacks (the planner's refusal says it); a point not
    #: listed: a loop of its own that does not call it.
    absent_points: ClassVar[dict[str, str]] = {}
    #: The active party's top when the method has its own (``sum``: the parties' class logits summed, no parameters,
    #: as aggVFL), not ``finetune.top``: the planner refuses a ``finetune.top`` set to another, and attacks are judged
    #: by this one. None: the shared loop's ``finetune.top``.
    top: ClassVar[str | None] = None
    #: What a passive party's embedding is: ``out_dim`` (``model.out_dim`` units: its bottom's output) or ``classes``
    #: (one unit per class: class logits, as aggVFL sends). The conformance check measures it on the messages.
    embedding: ClassVar[str] = "out_dim"

    def __init_subclass__(cls, **kwargs):
        """Keeps a method's members as vflpriv's module defines them (its data decides a claim: review eps6 E4)."""
        super().__init_subclass__(**kwargs)
        keep_defined(cls)

    def __init__(self, options: BaseModel):
        self.options = options

    def declared(self, run, *, num_classes: int):
        """``run`` as this method really trains it: ``finetune.top`` its own top, ``model.out_dim`` the width of the
        embeddings it sends, ``partition.active_labels_local`` resolved (what attacks' ``incompatible`` read)."""
        width = num_classes if self.embedding == "classes" else run.model.out_dim
        top = self.top or run.finetune.top
        every = run.partition.active_labels_local
        every = self.default_active_labels_local if every is None else every
        if (top, width, every) == (run.finetune.top, run.model.out_dim, run.partition.active_labels_local):
            return run
        return run.model_copy(update={"finetune": run.finetune.model_copy(update={"top": top}),
                                      "model": run.model.model_copy(update={"out_dim": width}),
                                      "partition": run.partition.model_copy(update={"active_labels_local": every})})

    @classmethod
    def passive_receives(cls) -> frozenset[tuple[str, str]]:
        """(kind, phase) pairs a passive party receives (from the active party or the server)."""
        return passive_receives(cls.sends)

    def supported(self) -> frozenset[str]:
        """``supports``, for this method's options (a method whose loop depends on an option overrides it)."""
        return self.supports

    def feature_uses(self) -> tuple[str, ...]:
        """Every place the method uses a passive party's features outside the shared finetuning loop, one clause each
        (``()``: none). The loop computes a passive party's embeddings and updates only at the passive defense points,
        so a mechanism there (``embedding-dp``) bounds what the loop does and nothing else: a use declared here voids
        its claim (no epsilon recorded, the note says why). Derived from the declared traffic and pretraining; a
        method that overrides ``finetune`` declares its uses by overriding this too, else they are taken as unknown
        (:meth:`undeclared_feature_uses`)."""
        uses = []
        if self.pretrains:
            uses.append("its pretraining trains each party's encoder on the party's features before finetuning starts "
                        "from it")
        if ("passive", EMBEDDING, PRETRAIN) in self.sends:
            uses.append("a passive party sends projections of its features in pretraining")
        if ("passive", WEIGHTS, PRETRAIN) in self.sends:
            uses.append("a passive party sends parameters trained on its features to the server in pretraining")
        return tuple(uses)

    def undeclared_feature_uses(self) -> tuple[str, ...]:
        """The class's own code (:func:`own_code`: ``finetune``, ``predict``, ``pretrain``, a bottom builder, any helper
        they call) without ``feature_uses`` declared beside it: what it does with the features is unknown. Kept apart
        from ``feature_uses``, which may be overridden (VFLHLP-A pretrains and declares none)."""
        return _undeclared(self, "feature_uses", "feature")

    def label_uses(self) -> tuple[str, ...]:
        """Every place the method reads the active party's labels outside the shared finetuning loop, one clause each
        naming where and what (``()``: none). The shared loop reads a label only through the defenses' hook points, so
        a mechanism there (``dp-gaussian``) bounds what the loop does and nothing else: any use declared here voids its
        claim (the run records no epsilon and says why). A method that overrides ``finetune`` declares its uses, for
        its options, by overriding this too (beside any code of its own: :meth:`undeclared_label_uses`, never assumed
        to be nothing)."""
        return (PRETRAINING_READS_LABELS,) if self.pretrain_reads_labels else ()

    def undeclared_label_uses(self) -> tuple[str, ...]:
        """The class's own code (:func:`own_code`) without ``label_uses`` declared beside it: what it reads is unknown.
        Kept apart from ``label_uses``, which methods override (VFLHLP), so that a subclass's own code is never
        assumed clean."""
        return _undeclared(self, "label_uses", "label")

    def pretrain(self, fed: Federation) -> list[nn.Module] | None:
        return None

    @classmethod
    def can_pretrain_alone(cls) -> bool:
        """Whether the method defines ``pretrain_alone`` (the ``attack.prior_ssl=own`` prior needs it)."""
        return cls.pretrain_alone is not Method.pretrain_alone

    def pretrain_alone(self, spec: PartySpec, x: torch.Tensor, *, party: int, seed: int, model: ModelConfig,
                       device: torch.device) -> nn.Module | None:
        """The encoder party ``party`` gets from this method's pretraining when it pretrains alone on its local
        samples ``x`` with no federation (the ``attack.prior_ssl=own`` prior), for the run seeded ``seed``; None
        (the default) when the method's pretraining has no such no-federation equivalent."""
        return None

    def alone_skeleton(self, spec: PartySpec, *, party: int, model: ModelConfig, device: torch.device) -> nn.Module:
        """An untrained module of the architecture :meth:`pretrain_alone` returns for ``party``, to load a cached one
        into (a method whose alone encoder is not the split local encoder, f_l of REFERENCE §2, overrides it: a
        mismatch would discard the cached encoder and recompute it on every reuse)."""
        return build_local_encoder(spec, model, generator=torch.Generator()).to(device)

    def fresh_bottoms(self, fed: Federation) -> list[nn.Module]:
        return [build_encoder(p.spec, fed.model, generator=fed.generator).to(fed.device) for p in fed.parties]

    def finetune(self, fed: Federation, pretrained: list[nn.Module] | None) -> Trained:
        encoders = [copy.deepcopy(m) for m in pretrained] if pretrained is not None else self.fresh_bottoms(fed)
        return finetune(fed, *split_model(fed, encoders))

    def predict(self, fed: Federation, trained: Trained, *, ids: torch.Tensor | None = None) -> torch.Tensor:
        """Test logits of the trained model (split inference: passive parties send their embeddings), or the logits
        of the training rows ``ids`` (the active party's validation rows, ``finetune.validation``)."""
        return predict(fed, trained, ids=ids)


keep_defined(Method)
