"""Typed configuration: one ``RunConfig`` per run, one ``ExperimentConfig`` per sweep.

Loaded from YAML or TOML, overridden with ``--set key.path=value``; every invalid value becomes a
:class:`ConfigError` whose message names the field and the problem.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    ValidationError,
    model_validator,
)

from vflpriv.errors import ConfigError

Phase = Literal["pretrain", "finetune"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class DatasetConfig(_Strict):
    name: str = "digits"
    root: Path | None = None
    max_samples: int | None = Field(None, ge=1)


class PartitionConfig(_Strict):
    """REFERENCE.md §1. Party 0 is the active party; ``adversary`` is a passive party."""

    parties: int = Field(2, ge=2)
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
    adversary: int = Field(1, ge=1)
    active_labels_local: bool = Field(False, description="VFLHLP: labels on all active local samples")

    @model_validator(mode="after")
    def _adversary_is_a_party(self) -> PartitionConfig:
        if self.adversary >= self.parties:
            raise ValueError(f"adversary {self.adversary} is not a passive party (1..{self.parties - 1})")
        return self


class ModelConfig(_Strict):
    """Bottom encoders (REFERENCE.md §2): MLP for tabular, a small CNN for images of 16 px or more."""

    encoder: Literal["auto", "mlp", "cnn"] = "auto"
    hidden: int = Field(512, ge=1)
    out_dim: int = Field(512, ge=1)
    cat_embedding: int = Field(32, ge=1, description="embedding size of categorical fields")


class FinetuneConfig(_Strict):
    """Split-learning finetuning: 20 epochs as in the FedHSSL code; Adam at its standard lr 1e-3 (the
    code's SGD lrs 0.005-0.03 overshoot with Adam: on digits lr 0.01 cost FedSplitNN 10 points)."""

    epochs: int = Field(20, ge=1)
    lr: float = Field(0.001, gt=0)
    batch_size: int = Field(64, ge=1)
    optimizer: Literal["adam", "sgd"] = "adam"
    weight_decay: float = Field(1e-5, ge=0)


class MethodConfig(_Strict):
    name: str = "splitnn"
    options: dict[str, Any] = Field(default_factory=dict)


class AttackConfig(_Strict):
    name: str = "mc"
    phase: Phase = "finetune"
    prior: Literal["simsiam", "aux", "same-attack", "none"] = Field(
        "simsiam",
        description="adversary prior: head on aux labels over the adversary's own SimSiam encoder "
        "(A_SimSiam), over a fresh encoder trained on aux (aux), the attack itself on that SimSiam "
        "encoder without a federation (same-attack), or none",
    )
    prior_epochs: int = Field(300, ge=1, description="training epochs of the prior's head")
    options: dict[str, Any] = Field(default_factory=dict)


class DefenseConfig(_Strict):
    name: str
    strength: float | None = Field(
        None, ge=0, description="on the defense's axis; unset = its identity (0 for noise scales, +inf for epsilon)"
    )
    phase: Phase = "finetune"
    kinds: list[str] | None = Field(None, description="message kinds to protect; None = the defense's own")
    party: int = Field(0, ge=0, description="the protecting party (its outgoing messages)")
    sweep: bool = Field(False, description="this defense's strength is the swept lambda")
    options: dict[str, Any] = Field(default_factory=dict)


class RunConfig(_Strict):
    """Everything one run depends on; its hash keys the results store."""

    dataset: DatasetConfig = Field(default_factory=DatasetConfig)
    partition: PartitionConfig = Field(default_factory=PartitionConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    method: MethodConfig = Field(default_factory=MethodConfig)
    finetune: FinetuneConfig = Field(default_factory=FinetuneConfig)
    attack: AttackConfig = Field(default_factory=AttackConfig)
    defenses: list[DefenseConfig] = Field(default_factory=list)
    seed: int = Field(0, ge=0)
    device: str = "cpu"

    def key(self) -> str:
        """Stable hash of the whole configuration (device excluded: it must not change results)."""
        payload = self.model_dump(mode="json", exclude={"device"})
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:20]

    @property
    def swept(self) -> DefenseConfig | None:
        return next((d for d in self.defenses if d.sweep), None)


class ExperimentConfig(RunConfig):
    """A sweep: the swept defense's strength x seeds, around one base run."""

    defenses: list[DefenseConfig] = Field(
        default_factory=lambda: [DefenseConfig(name="iso", sweep=True)],
        description="default threat model: ISO on the active party's finetuning gradients, swept",
    )
    strengths: list[NonNegativeFloat] = Field(default_factory=lambda: [1.0, 5.0, 25.0], min_length=1)
    seeds: list[NonNegativeInt] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    jobs: int = Field(
        default_factory=lambda: min(2, os.cpu_count() or 1), ge=1,
        description="parallel runs; each run uses one torch thread, so numbers do not depend on it",
    )
    backend: Literal["loky", "threading", "dask", "ray"] = "loky"

    @model_validator(mode="after")
    def _check_sweep(self) -> ExperimentConfig:
        if sum(d.sweep for d in self.defenses) > 1:
            raise ValueError("at most one defense can be swept")
        return self

    def runs(self) -> list[RunConfig]:
        """One RunConfig per (strength, seed); without a swept defense, one per seed."""
        base = self.model_dump(exclude={"strengths", "seeds", "jobs", "backend"})
        index = next((i for i, d in enumerate(self.defenses) if d.sweep), None)
        strengths = self.strengths if index is not None else [None]
        out = []
        for strength in strengths:
            for seed in self.seeds:
                data = json.loads(json.dumps(base, default=str))
                data["seed"] = seed
                if index is not None:
                    data["defenses"][index]["strength"] = strength
                out.append(RunConfig.model_validate(data))
        return out


def _format_validation(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "config"
    return f"invalid {where}: {err['msg']}"


def validate(model: type[BaseModel], data: dict[str, Any]) -> Any:
    """Validate ``data`` into ``model``, turning pydantic's report into one ConfigError line."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_validation(exc)) from None


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a YAML (.yaml/.yml) or TOML (.toml) file into a dict."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        data = tomllib.loads(text) if str(path).endswith(".toml") else yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"config file {path} is not valid YAML or TOML: {first}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of settings, not {type(data).__name__}")
    return data


def apply_override(data: dict[str, Any], assignment: str) -> None:
    """Apply one ``key.path=value`` (value parsed as YAML: numbers, booleans, lists) in place."""
    key, sep, raw = assignment.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set expects key=value, got '{assignment}'")
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError:
        value = raw
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        nxt = node.setdefault(part, {})
        if not isinstance(nxt, dict):
            raise ConfigError(f"--set {key}: '{part}' is not a section")
        node = nxt
    node[parts[-1]] = value
