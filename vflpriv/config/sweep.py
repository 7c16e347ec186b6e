"""A sweep's configuration: ``ExperimentConfig`` (the swept defense's strengths x seeds x attacks around one base
training) and the pieces the audit's configuration shares with it (seeds, runs per GPU, refused repeats)."""

from __future__ import annotations

import copy
import os
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, NonNegativeFloat, model_validator

from vflpriv.common.errors import VflprivError
from vflpriv.config.registry import ATTACKS, DEFENSES
from vflpriv.config.options import CANDIDATE, MAX_INT
from vflpriv.config.parse import check_space_values, parse_options, validate
from vflpriv.config.schema import AttackConfig, DefenseConfig, RunConfig, TrainingConfig, sweeps


class AttackSettings(AttackConfig):
    """The experiment's attack block: one attack name or several evaluated on each training.

    With several names, ``options`` maps each name to its options (``{mc: {epochs: 100}}``), and so does
    ``search_space`` (``{mc: {lr: [0.005, 0.05]}}``).
    """

    name: str | list[str] = "mc"
    search_space: dict[str, Any] = Field(default_factory=dict, description="candidate values per option (per attack "
                                                                            "name with several attacks)")

    @model_validator(mode="before")
    @classmethod
    def _one_of_a_list(cls, data: Any) -> Any:
        """A list of one (``[mc]``) is that attack, its options and search space keyed by its name (``{mc: {epochs:
        5}}``) as with several names: one experiment, dump and grid cell whichever the spelling (last3 F3, F4)."""
        if not isinstance(data, dict) or not isinstance(data.get("name"), list) or len(data["name"]) != 1:
            return data
        (name,) = data["name"]
        out = {**data, "name": name}
        for what in ("options", "search_space"):
            given = data.get(what)
            if isinstance(given, dict) and list(given) == [name] and isinstance(given[name], dict):
                out[what] = given[name]
        return out

    @model_validator(mode="after")
    def _options_per_attack(self) -> AttackSettings:
        names = self.names()
        if not names:
            raise ValueError("name must list at least one attack")
        if len(set(names)) != len(names):
            raise ValueError(f"attack names repeat: {', '.join(names)}")
        if len(names) > 1:
            for what, example in (("options", "epochs=100"), ("search_space", "lr=[0.005,0.05]")):
                given = getattr(self, what)
                stray = [k for k in given if k not in names]
                flat = [k for k, v in given.items() if k in names and not isinstance(v, dict)]
                if stray or flat:
                    raise ValueError(
                        f"with several attacks, {what} maps each attack name to its {what.replace('_', ' ')} "
                        f"(e.g. attack.{what}.{names[0]}.{example}); "
                        + (f"not an attack of this list: {', '.join(stray)}" if stray
                           else f"not a section of settings: {', '.join(f'{k}={given[k]!r}' for k in flat)}"))
        return self

    def names(self) -> list[str]:
        return [self.name] if isinstance(self.name, str) else list(self.name)

    def configs(self) -> list[AttackConfig]:
        """One attack's settings per name; with several, each one's options and search space checked here, where a
        bad one is named as the user wrote it (``attack.search_space.mc.lr``, not the planner's path without mc)."""
        names = self.names()
        if isinstance(self.name, str):
            return [validate(AttackConfig, self.model_dump(), prefix="attack.")]
        common = self.model_dump(exclude={"name", "options", "search_space"})
        out = []
        for n in names:  # validated with one error line: search_space's values are lists only once split per attack
            options, space = self.options.get(n, {}), self.search_space.get(n, {})
            out.append(validate(AttackConfig, {"name": n, "options": options, "search_space": space, **common},
                                prefix="attack.", sections={k: f"{k}.{n}" for k in ("options", "search_space")}))
            parse_options(ATTACKS.get(n), options, where=f"attack.options.{n}",
                          context=CANDIDATE if self.tune else None)  # tuned: judged over the space, below
            if self.tune:
                check_space_values(ATTACKS.get(n), n, space, base=options, where=f"attack.search_space.{n}")
        return out


#: How many runs share one GPU on a Dask or Ray cluster: each asks the scheduler for 1 / N of a GPU (locally, --jobs
#: says how many run at once and they are spread round-robin over the visible GPUs).
RunsPerGpu = Annotated[int, Field(ge=1, le=1024, description="on a Dask or Ray cluster with device cuda: how many runs "
                                                             "share one GPU (each asks its scheduler for 1/N of one)")]


def check_runs_per_gpu(config: Any) -> None:
    """ValueError where ``runs_per_gpu`` is set but nothing would read it (a local backend, or no CUDA)."""
    if config.runs_per_gpu != 1 and (
            config.backend in ("loky", "threading") or not config.device.startswith("cuda")):
        raise ValueError("runs_per_gpu is for runs on CUDA on a Dask or Ray cluster (--device cuda --backend dask|ray); "
                         "locally --jobs says how many run at once, spread over the visible GPUs")


#: A run's seed: what ``torch.Generator.manual_seed`` and NumPy accept alike.
Seed = Annotated[int, Field(ge=0, le=MAX_INT)]  # the one limit of every integer setting


def _some_seed(value: Any) -> Any:
    """An empty seed list (``--seeds ''``, ``seeds: []``) named with what to give, not as a list's minimum length."""
    if value == []:
        raise ValueError(f"no seed given; give at least one (an integer 0 to {MAX_INT}, e.g. 0,1,2), or leave the "
                         "seeds out for 0, 1, 2")
    return value


#: The seeds of an experiment or an audit: at least one.
Seeds = Annotated[list[Seed], BeforeValidator(_some_seed)]


def refuse_repeats(**lists: list | None) -> None:
    """ValueError naming each list given with a repeated entry (a repeat is a conflict, not deduplicated)."""
    for name, values in lists.items():
        shown = [f"{v:g}" if isinstance(v, float) else str(v) for v in values or []]
        repeated = sorted({v for v in shown if shown.count(v) > 1})
        if repeated:
            raise ValueError(f"{name} repeat: {', '.join(repeated)}; give each once")


def own_strength_option(defense: DefenseConfig) -> str:
    """The option of ``defense`` that sets its strength (dp-gaussian's ``target_epsilon``), or ''."""
    try:
        return DEFENSES.get(defense.name).own_strength_option(defense.options)
    except VflprivError:
        return ""  # an unknown name: the planner reports it


def default_strengths(defense: dict) -> list[float] | None:
    """What a sweep of ``defense`` (a raw section) runs when given no strengths: the defense's own defaults for its
    phase; None where an option sets its strength (one setting, no sweep) or the name is unknown."""
    try:
        cls = DEFENSES.get(defense.get("name"))
    except (VflprivError, TypeError):
        return None
    options = defense.get("options") if isinstance(defense.get("options"), dict) else {}
    if cls.own_strength_option(options):
        return None
    return list(cls.default_strengths(defense.get("phase", "finetune")))


class ExperimentConfig(TrainingConfig):
    """A sweep: the swept defense's strength x seeds x attacks, around one base training."""

    attack: AttackSettings = Field(default_factory=AttackSettings)
    defenses: list[DefenseConfig] = Field(
        default_factory=lambda: [DefenseConfig(name="iso", sweep=True)],
        description="default threat model: ISO on the active party's finetuning gradients, swept",
    )
    strengths: list[NonNegativeFloat] | None = Field(
        None, min_length=1, description="the swept defense's strengths on its own axis; unset: its default strengths "
        "(Protection.default_strengths: its audit strengths for the phase)")
    seeds: Seeds = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    jobs: int = Field(
        default_factory=lambda: min(2, os.cpu_count() or 1), ge=1, le=1024,
        description="parallel trainings; each uses one torch thread, so numbers do not depend on it",
    )
    backend: Literal["loky", "threading", "dask", "ray"] = "loky"
    runs_per_gpu: RunsPerGpu = 1

    @model_validator(mode="before")
    @classmethod
    def _default_strengths(cls, data: Any) -> Any:
        """Unset strengths of a swept defense: its own (:func:`default_strengths`), in its units."""
        if isinstance(data, dict) and data.get("strengths") is None:
            defenses = data.get("defenses", [d.model_dump() for d in cls.model_fields["defenses"].default_factory()])
            swept = [d for d in defenses if sweeps(d)] if isinstance(defenses, list) else []
            if len(swept) == 1:
                data = {**data, "strengths": default_strengths(swept[0])}
        return data

    @model_validator(mode="after")
    def _check_sweep(self) -> ExperimentConfig:
        check_runs_per_gpu(self)
        swept = [d for d in self.defenses if d.sweep]
        if len(swept) > 1:
            raise ValueError("at most one defense can be swept")
        if not swept and self.strengths is not None:
            raise ValueError("strengths are given but no defense is swept (--defense none sweeps nothing)")
        if "seed" in self.model_fields_set:
            raise ValueError("seed is set per run from seeds; give seeds: [N] (--seeds N) instead")
        if swept:
            option = own_strength_option(swept[0])
            if option and (self.strengths is not None or swept[0].strength is not None):
                raise ValueError(f"defense {swept[0].name}: options.{option} sets its strength; give no strengths "
                                 "(--strengths) beside it")
        refuse_repeats(strengths=self.strengths, seeds=self.seeds)
        return self

    def runs(self) -> list[RunConfig]:
        """One RunConfig per (strength, seed, attack); without a swept defense, one per (seed, attack)."""
        base = self.model_dump(exclude={"strengths", "seeds", "jobs", "backend", "runs_per_gpu", "attack", "seed"})
        index = next((i for i, d in enumerate(self.defenses) if d.sweep), None)
        strengths = (self.strengths or [None]) if index is not None else [None]
        attacks = [a.model_dump() for a in self.attack.configs()]
        out = []
        for strength in strengths:
            for seed in self.seeds:
                for attack in attacks:
                    data = copy.deepcopy(base)  # python values: an inf in an options dict stays inf
                    data["seed"], data["attack"] = seed, copy.deepcopy(attack)
                    if index is not None:
                        data["defenses"][index]["strength"] = strength
                    out.append(RunConfig.model_validate(data))
        return out
