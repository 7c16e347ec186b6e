"""Typed configuration: a ``TrainingConfig`` per trained federation, a ``RunConfig`` per (training, attack)
record (a sweep's ``ExperimentConfig``, which expands into them, is in :mod:`vflpriv.config.sweep`).

One training serves every attack evaluated on it (each from the adversary's view), so the training's
hash (everything but the attack) identifies what is trained and the run's hash (training + attack)
keys the record in the store. Reading files and ``--set`` overrides live in :mod:`vflpriv.config.parse`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, TypeAdapter, ValidationError, field_validator, model_validator

from vflpriv.common.errors import VflprivError
from vflpriv.common.secret_kinds import FEATURES
from vflpriv.config.keys import code_mark, config_hash, keyed
from vflpriv.config.options import MAX_INT, Options
from vflpriv.config.defaults import Component, DefenseSection
from vflpriv.config.registry import ATTACKS, AUDITORS, DATASETS, DEFENSES, METHODS

Phase = Literal["pretrain", "finetune"]


class DatasetConfig(Options):
    name: str = "digits"
    root: Path | None = Field(None, description="folder holding a user-supplied dataset's files")
    max_samples: int | None = Field(None, ge=1, description="cap the training rows (stratified, fixed draw)")


#: Partition fields that only choose labeled samples: the aligned and local sets are drawn before them, so what
#: reads no labels (a label-free pretraining, the adversary's own encoder) does not depend on them.
LABEL_FIELDS = {"labeled", "aux", "aux_source", "active_labels_local", "canaries", "canary_labels"}


class PartitionConfig(Options):
    """REFERENCE.md §1. Party 0 is the active party; ``adversary`` is the passive party that holds the auxiliary
    labels (the label attacks' adversary); a feature attack names its own adversary and victim (``attack``)."""

    parties: int = Field(2, ge=2, le=64)
    aligned_fraction: float = Field(0.2, gt=0, le=1)
    labeled: int = Field(200, ge=1)
    unaligned: Literal["shared", "disjoint"] = Field(
        "shared",
        description="shared: every party holds all non-aligned training rows as its local data (the "
        "FedHSSL code); disjoint: the non-aligned rows are dealt out, each to one party",
    )
    aux: int = Field(80, ge=0, description="adversary's auxiliary labeled samples, balanced per class")
    aux_source: Literal["unlabeled", "labeled"] = Field(
        "unlabeled",
        description="unlabeled: aux samples are adversary-local samples outside the labeled set (FedHSSL, "
        "Kang et al.); labeled: they are labeled aligned training samples, so the adversary knows a few "
        "training labels and receives their gradients (Li et al.'s threat model); they are then not scored",
    )
    aux_positive_ratio: float | None = Field(
        None, gt=0, lt=1, description="binary tasks: fraction of the aux samples that are positive (Kang et al.: "
        "BHI 0.3); unset = balanced per class")
    adversary: int = Field(1, ge=1, description="the passive party that holds the auxiliary labels and runs the "
                            "label attacks")
    aux_features: int | None = Field(
        None, ge=2, description="the feature attacks' auxiliary knowledge: this many (at least 2: a reconstruction is "
        "learnt from known pairs) of the aligned training samples the active party trains on (never canaries or "
        "validation samples), whose victim features the adversary knows (with the messages it received about them); "
        "drawn from the seed, apart from every other draw; unset = 10% of the aligned training samples (VFLAIR's)")

    def without_aux_features(self) -> PartitionConfig:
        """This partition as the training and a label attack read it: ``aux_features`` (read only by a feature attack
        and its prior) at its default, so their keys and caches stay the ones they were without it."""
        return self.model_copy(update={"aux_features": None})
    canaries: int = Field(
        0, ge=0, description="random-label canaries for the privacy audit: this many of the active party's labeled "
        "aligned training samples (never auxiliary ones) train with a label drawn uniformly from the classes, drawn "
        "from the partition's seed; attacks guess them and each run gets an empirical lower bound on its label-DP "
        "epsilon (epsilon_lower)")
    canary_labels: Literal["uniform", "pair"] = Field(
        "uniform", description="uniform: a canary's label is drawn from every class; pair: from two classes drawn per "
        "canary from the partition's seed (public), so each canary hides one bit and every bound uses C = 2 (the game "
        "an auditor's two-candidate crafted canaries need; the f-DP one-run bound is computed for it; read only with "
        "partition.canaries)")
    active_labels_local: bool | None = Field(
        None, description="VFLHLP: the active party knows the labels of all its local samples (every aligned one "
        "included, whatever labeled says); unset = the method's default"
    )

    @model_validator(mode="after")
    def _adversary_is_a_party(self) -> PartitionConfig:
        if self.adversary >= self.parties:
            raise ValueError(f"adversary {self.adversary} is not a passive party (1..{self.parties - 1})")
        return self


class ModelConfig(Options):
    """Bottom encoders (REFERENCE.md §2): MLP for tabular, a small CNN for images of 16 px or more."""

    encoder: Literal["auto", "mlp", "cnn"] = "auto"
    hidden: int = Field(512, ge=1)
    out_dim: int = Field(512, ge=1)
    cat_embedding: int = Field(32, ge=1, description="embedding size of categorical fields")


class FinetuneConfig(Component):
    """Split-learning finetuning. Default: 20 epochs as in the FedHSSL code, Adam at its standard lr 1e-3,
    batch 64, constant lr, no clipping. Why not the code's recipe (SGD momentum 0.9, weight decay 3e-5,
    cosine, clip 5, batch 512, lr from {0.005, 0.01, 0.03} picked on the test set; the ``fedhssl-paper``
    preset): with the few hundred labels these tasks have, batch 512 is one step per epoch, 20 steps in
    all, and no lr can be picked without the test set; Adam at batch 64 trains every method to its plateau
    at one untuned lr (benchmarks/results/table_iv_*.md). It changes what the adversary sees: 4x more
    gradient messages per epoch at 200 labels, so CAPs are comparable within one recipe only."""
    component: ClassVar = ("auditor", "auditor_options", AUDITORS)

    epochs: int = Field(20, ge=1)
    lr: float = Field(0.001, gt=0)
    batch_size: int = Field(64, ge=2, description="at least 2: BatchNorm cannot train on one sample")
    optimizer: Literal["adam", "sgd"] = Field("adam", description="adam, or sgd with momentum")
    momentum: float = Field(0.9, ge=0, lt=1, description="SGD momentum (code: 0.9)")
    weight_decay: float = Field(1e-5, ge=0, description="L2 weight decay (code: 3e-5)")
    schedule: Literal["constant", "cosine"] = Field(
        "constant", description="lr schedule over the epochs: cosine = CosineAnnealingLR stepped per epoch (code)")
    grad_clip: float = Field(
        0.0, ge=0, description="each party clips the gradient norm of its own models before its step, 0 = off (code: 5)")
    top: Literal["linear", "mlp", "sum"] = Field(
        "linear", description="the active party's top: linear (one Linear over the concatenated embeddings; "
        "splitVFL), mlp (Linear-ReLU-Linear, model.hidden wide), or sum (every bottom ends in a class-logit layer and "
        "the active party sums the logits, no trainable top: aggVFL, VFLAIR's default for DLI)")
    top_depth: int = Field(
        0, ge=0, le=16, description="hidden layers of the active party's top (top=linear): 0 is one Linear over the "
        "concatenated embeddings; d > 0 puts d Linear-ReLU layers (model.hidden wide) before it, moving the cut toward "
        "the passive parties (the free baseline every defense is compared with)")
    local_updates: int = Field(
        1, ge=1, le=1000, description="FedBCD (Liu et al.): after each exchange every party makes local_updates - 1 "
        "further updates with the stale received embeddings / gradients; 1 = plain split learning")
    bn_recalibrate: bool = Field(
        False, description="after finetuning, each party re-estimates its bottom's BatchNorm running statistics on "
        "its own training rows (train-mode forward passes, no labels, no messages): few finetuning steps leave them "
        "near their initial values, and eval mode then maps every test sample to nearly one feature (FedHSSL preset: "
        "FedSplitNN 0.10 -> 0.61 on Fashion-MNIST, shared/FEDHSSL-CODE.md R2)")
    validation: float = Field(
        0.0, ge=0, le=0.5, description="share of the labeled samples the active party holds out of finetuning as its "
        "validation set (never auxiliary samples or canaries): the run records the trained model's utility on it "
        "(utility_val, per epoch too with curve), so an lr or epoch is chosen on it, never on the test set; 0 = none")
    auditor: str | None = Field(
        None, description="an auditor of the training's DP defense (vflpriv list auditors; with partition.canaries): "
        "it guesses the canaries with privileges no party holds, and its empirical epsilon is recorded apart from the "
        "attacks' (auditor_*), never in leakage, CAP or verdicts")
    auditor_options: dict[str, Any] = Field(
        default_factory=dict, description="the auditor's options (vflpriv describe <auditor>), e.g. gradient-lrt's "
        "canary_inputs: crafted")
    curve: bool = Field(
        False, description="record the test utility and the MB sent so far (pretraining and finetuning) at the end of "
        "every finetuning epoch (paper 003's Table 1: MB to reach a target accuracy): a measurement that sends, counts "
        "and draws nothing the training sees, so every other number is the same with it")


class MethodConfig(Component):
    component: ClassVar = ("name", "options", METHODS)
    name: str = "splitnn"
    options: dict[str, Any] = Field(default_factory=dict)


#: The most candidates one tuned attack may evaluate (each is a run of the attack).
MAX_SEARCH_BUDGET = 256
#: What of the attack block does not change how an acting attack trains (its training key leaves it out).
NOT_TRAINING = {"prior", "prior_epochs", "prior_ssl", "tune", "search_budget", "search_space"}


def refuse_untuned(section: Any, *, tune: bool, budget: str, space: str, switch: str) -> None:
    """ValueError where a search's budget or space is set but nothing is tuned (they would be silently ignored)."""
    if tune:
        return
    given = [name for name in (budget, space)
             if getattr(section, name) != type(section).model_fields[name].get_default(call_default_factory=True)]
    if given:
        raise ValueError(f"{' and '.join(given)} set, but nothing is tuned ({switch}, --tune-attacks, is off) and "
                         "nothing else reads it; tune, or remove the setting")


class AttackConfig(Component):
    component: ClassVar = ("name", "options", ATTACKS)
    name: str = "mc"
    phase: Phase = "finetune"
    adversary: int | Literal["server"] | None = Field(
        None, description="who runs the attack: a party index or the server; unset = the attack's default role (a "
        "label attack: partition.adversary; a feature attack: the active party, party 0)")
    victim: int | None = Field(
        None, ge=0, description="a feature attack's victim, whose features it infers; unset = party 1 when the "
        "adversary is the active party or the server, the active party when a passive party attacks")
    prior: Literal["simsiam", "aux", "same-attack", "none"] = Field(
        "simsiam",
        description="adversary prior: head on aux labels over the adversary's own SimSiam encoder "
        "(A_SimSiam), over a fresh encoder trained on aux (aux), the attack itself on that SimSiam "
        "encoder without a federation (same-attack), or none. Label attacks only, as prior_epochs and prior_ssl: a "
        "feature attack's prior is fitted on its known samples (the mean or a ridge map), and these three are "
        "accepted unread there: a preset sets them for every attack of its grid, and a run's settings do not say "
        "who set them",
    )
    prior_epochs: int = Field(300, ge=1, description="training epochs of the prior's head (label attacks only)")
    prior_ssl: Literal["auto", "simsiam", "own"] = Field(
        "auto", description="the adversary's own pretraining behind the simsiam and same-attack priors: plain "
        "SimSiam (A_SimSiam), or own: the method's own pretraining done alone (methods whose pretraining is local: "
        "local-*, ssvfl-*, vflhlp*), so that leakage measures the federation rather than SSL flavours; auto: own "
        "where the method has such a pretraining, else simsiam (label attacks only, see prior)")
    options: dict[str, Any] = Field(default_factory=dict)
    tune: bool = Field(False, description="select the attack's settings on the adversary's auxiliary labels "
                                          "(attacks.search); the record also gets the oracle bound")
    search_budget: int = Field(8, ge=1, le=MAX_SEARCH_BUDGET, description="candidates a tuned attack evaluates")
    search_space: dict[str, list[Any]] = Field(
        default_factory=dict, description="candidate values per option, replacing the attack's own for those options")

    @field_validator("adversary", mode="before")
    @classmethod
    def _a_role(cls, value: Any) -> Any:
        """A party index or 'server' (any case); anything else (another string, a fraction, a list) is named with the
        valid choices, not as a union's branches."""
        if isinstance(value, str) and value.strip().lower() == "server":
            return "server"
        digits = value.strip().lstrip("-") if isinstance(value, str) else ""
        index = digits.isascii() and digits.isdigit()  # '²' and other Unicode digits are no index
        if value is None or index or isinstance(value, int) or isinstance(value, float) and value.is_integer():
            return value
        raise ValueError(f"{value!r} is no role; give a party index (0: the active party, 1 and up: the passive "
                         "parties) or 'server'")

    @field_validator("victim", mode="before")
    @classmethod
    def _a_party(cls, value: Any) -> Any:
        """A party index; anything else (the server, another string, a fraction, a negative number) is named with the
        valid choices."""
        digits = value.strip() if isinstance(value, str) else ""
        if value is None or isinstance(value, bool) or digits.isascii() and digits.isdigit() or isinstance(
                value, (int, float)) and float(value).is_integer() and value >= 0:
            return value
        raise ValueError(f"{value!r} is no victim; give a party index (0: the active party, 1 and up: the passive "
                         "parties; the server holds no features)")

    @model_validator(mode="after")
    def _tuning_settings_need_tuning(self) -> AttackConfig:
        refuse_untuned(self, tune=self.tune, budget="search_budget", space="search_space", switch="attack.tune")
        if isinstance(self.adversary, int) and self.adversary < 0:
            raise ValueError(f"adversary {self.adversary} is neither a party index (0, 1, ...) nor 'server'")
        return self


_BOOL = TypeAdapter(bool)


def sweeps(section: Any) -> bool:
    """Whether a raw defense section (a config's, a ``--set``'s) is swept, read as validation reads ``sweep``
    (``"false"``, ``"no"``, ``0`` are false); a value validation refuses reads as unswept (validation names it, or a
    ``--defense`` beside it is told the two disagree)."""
    if not isinstance(section, dict):
        return False
    try:
        return _BOOL.validate_python(section.get("sweep", False))
    except ValidationError:
        return False


class DefenseConfig(DefenseSection):
    component: ClassVar = ("name", "options", DEFENSES)
    name: str
    strength: float | None = Field(
        None, ge=0, description="on the defense's axis; unset = its identity (0 for noise scales, +inf for epsilon)"
    )
    phase: Phase = "finetune"
    kinds: list[str] | None = Field(None, description="message kinds to protect; None = the defense's own")
    party: int | None = Field(
        None, ge=0, description="the protecting party (its outgoing messages); unset = the active party, or every "
        "passive party when the active party sends nothing this defense protects in the phase")
    sweep: bool = Field(False, description="this defense's strength is the swept lambda")
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _kinds_not_empty(self) -> DefenseConfig:
        refuse_empty_kinds(self.name, self.kinds)
        return self


def refuse_empty_kinds(name: str, kinds: list[str] | None) -> None:
    """ValueError for ``kinds: []``, naming the valid kinds: it read as the defense's own kinds, silently."""
    if kinds != []:
        return
    try:
        valid = ", ".join(DEFENSES.get(name).supported_kinds)
    except VflprivError:
        return  # an unknown defense: the planner says so
    raise ValueError(f"kinds is empty; name the message kinds {name} protects ({valid}), or leave it out for its "
                     "own" if valid else f"kinds is empty, and {name} acts on no message; leave it out")


#: Config sections a dataset can give defaults for (its loader's ``default_partition``, ``default_model``).
DATASET_DEFAULT_SECTIONS = ("partition", "model")


def dataset_defaults(name: str, section: str) -> dict[str, Any]:
    """The defaults a dataset's loader declares for a config section; {} if it declares none or the name is
    unknown (the planner reports unknown names)."""
    try:
        return dict(getattr(DATASETS.get(name), f"default_{section}", {}))
    except VflprivError:
        return {}


def dataset_partition_defaults(name: str) -> dict[str, Any]:
    return dataset_defaults(name, "partition")


class TrainingConfig(Options):
    """Everything one trained federation depends on; every attack on it shares it."""

    @model_validator(mode="before")
    @classmethod
    def _dataset_defaults(cls, data: Any) -> Any:
        """The dataset's own defaults fill every field of a section (partition, model) the user left unset."""
        if not isinstance(data, dict):
            return data
        dataset = data.get("dataset", {})
        name = dataset.get("name", "digits") if isinstance(dataset, dict) else getattr(dataset, "name", "digits")
        if not isinstance(name, str):
            return data
        out = dict(data)
        for section, model in (("partition", PartitionConfig), ("model", ModelConfig)):
            defaults = dataset_defaults(name, section)
            given = data.get(section, {})
            if not defaults or not isinstance(given, (dict, model)):
                continue
            given = given if isinstance(given, dict) else given.model_dump(include=given.model_fields_set)
            out[section] = {**defaults, **given}
        return out

    dataset: DatasetConfig = Field(default_factory=DatasetConfig)
    partition: PartitionConfig = Field(default_factory=PartitionConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    method: MethodConfig = Field(default_factory=MethodConfig)
    finetune: FinetuneConfig = Field(default_factory=FinetuneConfig)
    defenses: list[DefenseConfig] = Field(default_factory=list)
    seed: int = Field(0, ge=0, le=MAX_INT)
    device: str = "cpu"

    def training_key(self) -> str:
        """Hash of what the federation's training depends on (the device must not change results; nor does
        ``partition.aux_features``, which only a feature attack reads)."""
        trained = self.model_copy(update={"partition": self.partition.without_aux_features()})
        return config_hash(keyed(trained.model_dump(mode="json", include=TRAINING_FIELDS)))

    def training(self) -> TrainingConfig:
        return TrainingConfig.model_validate(self.model_dump(include=set(TrainingConfig.model_fields)))

    @property
    def swept(self) -> DefenseConfig | None:
        return next((d for d in self.defenses if d.sweep), None)


TRAINING_FIELDS = set(TrainingConfig.model_fields) - {"device"}


class RunConfig(TrainingConfig):
    """One record: a training and one attack on it."""

    attack: AttackConfig = Field(default_factory=AttackConfig)

    def attack_acts(self) -> bool:
        """Whether the attack acts during training (``Attack.acts``): then the training is the attack's own."""
        try:
            return bool(getattr(ATTACKS.get(self.attack.name), "acts", False))
        except VflprivError:
            return False  # an unknown attack: the planner says so

    def training_key(self) -> str:
        """Hash of what the training depends on: the training settings, and an attack that acts during it (its
        runs train a federation of their own, never shared with the passive attacks)."""
        key = super().training_key()
        if not self.attack_acts():
            return key
        acting = {**self.attack.model_dump(mode="json", exclude=NOT_TRAINING), **code_mark(ATTACKS, self.attack.name)}
        return config_hash({"training": key, "acting attack": acting})

    def key(self) -> str:
        """Stable hash of the whole configuration as the run reads it (:meth:`as_read`; device excluded): the record's
        key in the store."""
        return config_hash(keyed(self.as_read().model_dump(mode="json", exclude={"device"})))

    def as_read(self) -> RunConfig:
        """This run as it reads its configuration: a label attack's without ``partition.aux_features`` (a feature
        attack's known samples), which neither it nor its training reads; what its key and its record hold."""
        if self.attack_secret() == FEATURES:
            return self
        return self.model_copy(update={"partition": self.partition.without_aux_features()})

    def recorded(self) -> str:
        """The settings as this run's record stores them (``RunRecord.config``), by whose text records are compared."""
        return json.dumps(self.as_read().model_dump(mode="json"), sort_keys=True)

    def attack_secret(self) -> str:
        """The secret the attack infers (``Attack.secret``); an unknown attack's is unknown (the planner says so)."""
        try:
            return ATTACKS.get(self.attack.name).secret
        except VflprivError:
            return ""
