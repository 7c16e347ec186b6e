"""The strict base of every settings model: the run configuration and each component's ``Options``.

One rule set for every number a user can type: unknown keys are refused, floats must be finite
(``inf``, ``nan`` and overflowing literals such as ``1e400`` are refused with "finite number"),
integers must fit a C ``int`` (a larger count cannot be a sensible epoch count or batch size, and
would only fail deep inside torch), and true / false is not a number (pydantic would read ``canaries: true``
as one canary and ``adversary: true`` as party 1).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, ClassVar, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator, model_validator

from vflpriv.common.components import built
from vflpriv.common.declarations import vflpriv_own
from vflpriv.common.errors import ConfigError
from vflpriv.config.yaml_values import PLAIN_RULE, unplain

#: The largest integer any setting accepts.
MAX_INT = 2**31 - 1

#: The validation context of one candidate of a search: its unread options were judged over the whole space
#: (:func:`check_candidates`), where another candidate may read them.
CANDIDATE = {"candidate": True}


def _check_int(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        raise ValueError(f"integer too large (at most {MAX_INT})")
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_int(item)
    return value


def _takes_bool(annotation: Any) -> bool:
    """Whether a field typed ``annotation`` may hold true / false (a bool, Any, or a Literal of them, anywhere)."""
    if annotation is bool or annotation is Any:
        return True
    if get_origin(annotation) is Literal:
        return any(isinstance(a, bool) for a in get_args(annotation))
    return any(_takes_bool(a) for a in get_args(annotation))


def _takes_number(annotation: Any) -> bool:
    """Whether a field typed ``annotation`` holds an int or a float anywhere (what pydantic would read true into)."""
    return annotation in (int, float) or any(_takes_number(a) for a in get_args(annotation))


def _takes_text(annotation: Any) -> bool:
    """Whether a field typed ``annotation`` keeps any text as text (a str, a Path or Any, anywhere)."""
    return annotation in (str, Path, Any) or any(_takes_text(a) for a in get_args(annotation))


def _unplain_number(value: Any) -> str | None:
    """A text (or a list's) that pydantic reads as a number but ``--seeds`` refuses (``'1_000'``, quoted in YAML or
    TOML), if any."""
    if isinstance(value, (list, tuple)):
        return next(filter(None, map(_unplain_number, value)), None)
    if not (isinstance(value, str) and unplain(value)):
        return None
    try:
        return value if float(value) is not None else None
    except ValueError:
        return None


def _names(annotation: Any) -> list[str]:
    """The names a field typed ``annotation`` takes (its Literal strings, anywhere)."""
    if get_origin(annotation) is Literal:
        return [repr(a) for a in get_args(annotation) if isinstance(a, str)]
    return [name for a in get_args(annotation) for name in _names(a)]


def _has_bool(value: Any) -> bool:
    return isinstance(value, bool) or (isinstance(value, (list, tuple)) and any(_has_bool(v) for v in value))


class Options(BaseModel):
    """Base of a component's options and of every config section: strict keys, finite numbers."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, validate_assignment=True)
    #: Options read only under another's values, {option: (enabling option, the values that read it)}: one given
    #: otherwise is refused, except in a search's candidate (:data:`CANDIDATE`) where another candidate reads it.
    read_only_with: ClassVar[dict[str, tuple[str, tuple]]] = {}

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        annotation = cls.model_fields[info.field_name].annotation
        if _has_bool(value) and _takes_number(annotation) and not _takes_bool(annotation):
            names = _names(annotation)
            raise ValueError(f"got true/false where a number{' or ' + ', '.join(names) if names else ''} is expected")
        text = _unplain_number(value) if _takes_number(annotation) and not _takes_text(annotation) else None
        if text is not None:
            raise ValueError(f"'{ascii(text)[1:-1][:40]}' is no plain number; {PLAIN_RULE}")
        return value

    @field_validator("*", mode="after")
    @classmethod
    def _bounded_integers(cls, value: Any) -> Any:
        return _check_int(value)

    @model_validator(mode="after")
    def _read(self, info: ValidationInfo) -> Options:
        if info.context != CANDIDATE:
            for name in self.read_only_with:
                refuse_unread(self, name)
        return self


def _spell(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _needs(key: str, reading: tuple) -> str:
    return " or ".join(f"{key}={_spell(v)}" for v in reading)


def refuse_unread(options: Options, name: str) -> None:
    """ValueError where option ``name`` is given a value other than its default that nothing reads (its enabling option
    in ``read_only_with`` does not read it): the run would measure something other than what the user asked for."""
    key, reading = options.read_only_with[name]
    default = type(options).model_fields[name].default
    if getattr(options, key) not in reading and getattr(options, name) != default:
        raise ValueError(f"{name}={getattr(options, name)!r} is read only with {_needs(key, reading)}; set "
                         f"{_needs(key, reading)} too, or leave {name} out")


def read_alone(model: type[Options], options: dict) -> dict:
    """``options`` less those its own values leave unread (``read_only_with``): what an untuned run of a tuned
    attack's options reads (a fixed option a search reads in some candidate only)."""
    given = model.model_validate(options, context=CANDIDATE)
    unread = {name for name, (key, reading) in model.read_only_with.items() if getattr(given, key) not in reading}
    return {k: v for k, v in options.items() if k not in unread}


def check_candidates(cls: Any, attack: str, base: dict, space: dict[str, list], *, where: str) -> None:
    """ConfigError, before training, where a search of attack ``attack`` (class ``cls``) over ``space`` (named
    ``where``; over the attack's own space, when it has one) beside the options given (``base``) would meet a
    candidate its options refuse (:func:`_refuse_clashes`), or where a searched or given option is read by none of
    the candidates: each one's enabling value is the given one (the first candidate) or one the search tries."""
    model = cls.Options
    given = model.model_validate(base, context=CANDIDATE)
    own = built("attack", attack, lambda: cls(given).space())  # a plugin's constructor: one error where it fails
    tried = {**own, **space} if own else space
    plugin = None if vflpriv_own(cls) else lambda options: built("attack", attack, lambda: cls(options))
    _refuse_clashes(model, base, tried, where=where, build=plugin)
    for name, (key, reading) in model.read_only_with.items():
        keys = {getattr(given, key)} | {getattr(model.model_validate({**base, key: v}, context=CANDIDATE), key)
                                        for v in tried.get(key, ())}
        value = getattr(given, name)
        fixed = value != model.model_fields[name].default
        if (name in space or fixed) and not keys & set(reading):
            base_at = where.replace("search_spaces", "attack_options").replace("search_space", "options")
            what = f"{where}.{name} is searched" if name in space else f"{base_at}.{name}={value!r} given"
            has = " or ".join(f"{key}={_spell(k)}" for k in sorted(keys, key=str))
            raise ConfigError(f"{what}, but no candidate of the search reads it: {name} is read only with "
                              f"{_needs(key, reading)}, and every candidate has {has}; search "
                              f"{_needs(key, reading)} too, or leave {name} out")


def _refuse_clashes(model: type[Options], base: dict, tried: dict[str, Any], *, where: str,
                    build: Any = None) -> None:
    """ConfigError naming the first candidate, of one searched value or two beside the given options, that ``model``
    refuses (``min_ratio`` above ``max_ratio``) or, for a plugin, that ``build`` (its constructor) refuses: such a
    candidate failed the search after the training (review lo7 F5). Pairs only: no options' check reads more; a
    plugin's constructor may refuse any combination, so planning builds its every grid candidate too
    (``runner.planning.check_search_space``)."""
    axes = [[(k, v) for v in values] for k, values in tried.items()]
    singles = [[c] for axis in axes for c in axis]
    pairs = [p for i, first in enumerate(axes) for later in axes[i + 1:] for p in itertools.product(first, later)]
    for pair in [*singles, *pairs]:
        try:
            options = model.model_validate({**base, **dict(pair)}, context=CANDIDATE)
        except ValidationError as exc:
            message = exc.errors()[0]["msg"].removeprefix("Value error, ")
            shown = ", ".join(f"{k}={v!r}" for k, v in pair)
            raise ConfigError(f"{where}: the search would try {shown}, which its options refuse ({message}); "
                              "search values every combination of which is valid") from None
        try:
            if build is not None:
                build(options)
        except ConfigError as exc:
            shown = ", ".join(f"{k}={v!r}" for k, v in pair)
            raise ConfigError(f"{where}: the search would try {shown}: {exc}") from exc.__cause__


class NoOptions(Options):
    """Options model of a component that takes none."""
