"""What an attack is, what it may see, and what it may do.

An attack receives an :class:`AdversaryView`: the adversary party's own features, its encoder
snapshot for the attacked phase, the messages it received, its auxiliary labels, and the steps of its own
training it asked to record. The view has no field holding its targets' labels, so an attack cannot read
them; the runner scores its output.

Beyond reading the view after training, an attack may need the adversary to observe or act *during* training,
at the engine's hook points (``vflpriv.engine.hooks``):

- it observes when ``observation()`` returns what to record (e.g. BLI: its bottom at the first exchange of
  epoch 0, like VFLAIR); the training of its run then records those steps of the adversary's own party;
- it acts when ``acts`` is true and ``behaviour()`` says what the adversary does (e.g. Fu et al.'s malicious
  optimiser for its own bottom). Such an attack changes the trained federation: its runs get a training of
  their own (the run's training key includes the attack), their utility is measured under attack, and their
  records say so. It acts only on what the adversary owns.

The planner refuses an attack whose hook points the method's training loop does not call (its ``supports``).

A tuned attack (``attack.tune``) selects its own hyperparameters from ``search_space`` with the adversary's
auxiliary labels only (``vflpriv.attacks.search``): an attack with a search space must also guess the
``holdout`` target set, auxiliary samples the search hides from its labels to score each candidate.

Every attack declares the secret it infers (``secret``: ``labels``, the active party's labels; ``features``, a victim
party's raw features: ``vflpriv.attacks.features``) and the roles that may run it (``roles``: ``active``, ``passive``,
``server``). The run names the adversary (``attack.adversary``; a label attack's is ``partition.adversary``, the
passive party holding the auxiliary labels), and the planner refuses a role the attack does not declare; the view
holds what that role received through the channel, its own data and its own models, nothing else.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import ClassVar

from pydantic import BaseModel

from vflpriv.common.components import built
from vflpriv.config.options import CANDIDATE, NoOptions
from vflpriv.engine.adversary import AdversaryView, Behaviour, Inference, Observation
from vflpriv.engine.hooks import PASSIVE_OPTIMIZER, PASSIVE_STEP

__all__ = ["AdversaryView", "Attack", "Behaviour", "Inference", "Observation"]


class Attack(ABC):
    """Base of registered attacks (label inference unless ``secret`` says otherwise)."""

    Options: ClassVar[type[BaseModel]] = NoOptions
    #: The secret it infers: ``labels`` (the active party's) or ``features`` (the victim party's).
    secret: ClassVar[str] = "labels"
    #: The roles that may run it: a label attack is a passive party's (the active party holds the labels).
    roles: ClassVar[frozenset[str]] = frozenset({"passive"})
    needs_encoder: ClassVar[bool] = False
    needs_messages: ClassVar[tuple[tuple[str, str], ...]] = ()
    binary_only: ClassVar[bool] = False
    #: Whether the attack needs the adversary's auxiliary labels (refused with ``partition.aux=0``).
    needs_aux: ClassVar[bool] = True
    #: Options of a quick audit (``vflpriv audit``) where the defaults are too slow for many trainings.
    audit_options: ClassVar[dict] = {}
    #: Whether it acts during training (``behaviour()``): its runs train a federation of their own.
    acts: ClassVar[bool] = False
    #: The published attack it follows (``vflpriv describe`` prints it).
    anchor: ClassVar[str] = ""
    #: What kind of attack it is (what it does with the view: ``model completion``, ``gradients``, ``similarity``),
    #: and whether it is the strongest of its kind on vflpriv's recorded grids: a quick audit (``vflpriv audit
    #: --quick``) runs only the strongest of each kind.
    kind: ClassVar[str] = ""
    strongest_of_kind: ClassVar[bool] = False
    #: Candidate values of its own options that a tuned attack selects among on auxiliary labels (the options it
    #: runs with are always a candidate); empty: nothing to select (``untunable`` says why).
    search_space: ClassVar[dict[str, tuple]] = {}
    #: The iteration-count option successive halving shortens for early rounds ("" : every candidate runs whole).
    budget_option: ClassVar[str] = ""
    #: Options only its ``behaviour()`` reads in training: a search scores candidates on the one training, never
    #: re-run, so a search space naming one is refused (a candidate would differ from the others only in name).
    training_options: ClassVar[frozenset[str]] = frozenset()
    #: Why the attack has no search space (``vflpriv describe`` prints it).
    untunable: ClassVar[str] = ""
    #: Raised when the attack's algorithm changes under its name: each revision's runs have keys of their own, so a
    #: store of an earlier revision's records is recomputed, not resumed (0: the first; left out of the keys).
    revision: ClassVar[int] = 0

    def __init__(self, options: BaseModel):
        self.options = options

    def required_messages(self, phase: str) -> tuple[tuple[str, str], ...]:
        """(kind, phase) pairs the adversary must receive for this attack on ``phase``: the runner
        refuses (in ``plan``) a method that sends none of them and records them in the inbox, with
        ``needs_messages`` (pairs recorded whatever the attacked phase)."""
        return ()

    def space(self) -> dict[str, tuple]:
        """The search space of these options (an attack whose mode decides what it can guess narrows it)."""
        return dict(self.search_space)

    def observation(self) -> Observation | None:
        """Which of the adversary's own training steps to record for it (None: it reads the view after training)."""
        return None

    def behaviour(self) -> Behaviour | None:
        """What the adversary does in training when the attack ``acts``."""
        return None

    def hook_points(self) -> frozenset[str]:
        """The training loop's hook points it needs (the method must call them)."""
        return frozenset(([PASSIVE_STEP] if self.observation() is not None else [])
                         + ([PASSIVE_OPTIMIZER] if self.acts else []))

    def incompatible(self, run, *, num_classes: int) -> str:
        """Why the attack cannot run in ``run`` (a RunConfig, on a task of ``num_classes`` classes) beyond what the
        base checks, or "" when it can: the planner refuses it with this reason (e.g. a setting it depends on)."""
        return ""

    def own_problem(self, spec) -> str:
        """Why these options do not fit the adversary's own features of ``spec`` (a :class:`PartySpec`), or "": the
        planner refuses it (an option its data leaves unread)."""
        return ""

    def search_problem(self, space: dict[str, list], problem: Callable[[Attack], str], *, name: str) -> str:
        """The ``problem`` (e.g. ``lambda a: a.own_problem(spec)``) of the options given, or of a searched value, that
        fits this data in no candidate, alone or beside another searched value ("" when each fits in one): a value
        the data leaves unread or cannot take is refused before training; views=3 beside augment_rate=[0.1] is kept.
        ``name``: the attack's, for the one error of a plugin whose constructor refuses a candidate."""
        def found(changes: dict) -> str:
            options = type(self.options).model_validate({**base, **changes}, context=CANDIDATE)
            return problem(built("attack", name, lambda: type(self)(options)))

        base = self.options.model_dump(mode="json")
        if (given := problem(self)) and all(found({k: v}) for k in space for v in space[k]):
            return given
        for option, values in space.items():
            for value in values:
                alone = found({option: value})
                if alone and all(found({option: value, k: v}) for k in space if k != option for v in space[k]):
                    alone = alone.replace("attack.options.", "")  # the candidate's, not an option the user gave
                    return (f"the candidate {option}={value!r} of attack.search_space.{option} does not fit this data "
                            f"({alone})")
        return ""

    def left_out_of_audit(self, run) -> str:
        """Why the audit's default battery leaves the attack out on ``run`` (as :meth:`Method.declared` gives it), or
        "" to run it: a setting where it is known to fail, so that its failure would fill the report, not leakage.
        Named in ``--attacks`` it runs anyway; the audit prints the reason."""
        return ""

    @abstractmethod
    def infer(self, view: AdversaryView) -> dict[str, Inference]:
        """Guess the labels of (some of) ``view.targets``; keys are target set names."""


def labeled_targets(run) -> int | None:
    """How many training targets the adversary's finetuning messages cover, where planning can know it: the
    labeled aligned samples (``run`` as :meth:`Method.declared` gives it); None where the active party labels its
    local samples too (VFLHLP), whose count only the split knows."""
    return None if run.partition.active_labels_local else run.partition.labeled
