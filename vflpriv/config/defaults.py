"""One spelling of a component's options: an option given at its default is dropped as the settings are validated, so
its run has the key, the stored record and the table row of the run that left it out (review hunt H8), as are a label
defense's own kinds (review var F4). A default changed under a component's name is its revision (``revision``, which
marks its keys), as it is for the runs that leave the option out."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import model_validator

from vflpriv.common.errors import VflprivError
from vflpriv.common.secret_kinds import LABELS
from vflpriv.config.options import CANDIDATE, NoOptions, Options
from vflpriv.config.registry import Registry


def without_defaults(registry: Registry, name: Any, options: Any) -> Any:
    """``options`` of component ``name`` less each whose removal leaves them the same as validated (a default however
    written, or a value a validator derives from the others anyway); the others as given, so a run giving no default
    keeps its key bit for bit. A plugin's stay as given (its ``Options`` are its code, judged by planning first), as
    do options the component refuses (the planner names them)."""
    if not (isinstance(name, str) and isinstance(options, dict) and options and registry.builtin(name)):
        return options
    try:
        model = getattr(registry.get(name), "Options", NoOptions)
        kept, read = dict(options), _validated(model, options)
        for option in sorted(options):
            fewer = {k: v for k, v in kept.items() if k != option}
            if _validated(model, fewer) == read:
                kept = fewer
    except (VflprivError, ValueError, TypeError):  # pydantic's ValidationError is a ValueError
        return options
    return kept if len(kept) < len(options) else options


def _validated(model: type[Options], options: dict) -> dict:
    """``options`` as ``model`` reads them (a search's candidate: an option only another's value reads is no error)."""
    return model.model_validate(options, context=CANDIDATE).model_dump()


class Component(Options):
    """A config section naming a component and giving its options (``component``: the two fields and the registry
    the name is looked up in), the options validated without their defaults (:func:`without_defaults`)."""

    component: ClassVar[tuple[str, str, Registry]]

    @model_validator(mode="before")
    @classmethod
    def _options_without_defaults(cls, data: Any) -> Any:
        name, options, registry = cls.component
        if not isinstance(data, dict) or options not in data:
            return data
        given = data.get(name, cls.model_fields[name].default)
        return {**data, options: without_defaults(registry, given, data[options])}


class DefenseSection(Component):
    """A defense's section: its options without their defaults, and its kinds left out where they are the ones a label
    defense is built with when none are given (:func:`kinds_without_default`)."""

    @model_validator(mode="before")
    @classmethod
    def _kinds_without_default(cls, data: Any) -> Any:
        return kinds_without_default(cls.component[2], data) if isinstance(data, dict) else data


def kinds_without_default(registry: Registry, data: dict) -> dict:
    """A built-in label defense's section (``label-dp``, ``alibi``) less its ``kinds`` where they are, as a set, its
    defaults for its phase: the planner hands a label defense its kinds as given (``message_kinds``: whatever the
    method sends) and the defense turns none into those defaults (``Protection.__init__``, a frozenset)."""
    name, kinds = data.get("name"), data.get("kinds")
    if not (isinstance(name, str) and isinstance(kinds, list) and kinds and registry.builtin(name)):
        return data
    try:
        cls = registry.get(name)
        own = set(cls.default_kinds_for(data.get("phase", "finetune"))) if LABELS in cls.supported_kinds else None
    except (VflprivError, TypeError):
        return data
    return {k: v for k, v in data.items() if k != "kinds"} if set(map(str, kinds)) == own else data
