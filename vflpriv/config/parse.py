"""Reading experiment files and ``--set`` overrides into config models, with one-line errors.

Files are read defensively: at most 1 MiB, strict UTF-8, YAML without aliases (a "billion laughs"
file expands aliases exponentially before any check could run; anchors alone are harmless), TOML as
is. Every validation error becomes one :class:`ConfigError` line naming the setting, the value and,
for an unknown key, the valid keys of its section.
"""

from __future__ import annotations

import copy
import difflib
import fnmatch
import re
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tomllib
import yaml
from pydantic import BaseModel, ValidationError

from vflpriv.common.errors import ConfigError
from vflpriv.config.options import CANDIDATE, NoOptions, check_candidates
from vflpriv.config.overrides import apply_overrides, shown
from vflpriv.config.yaml_values import load_yaml

MAX_CONFIG_BYTES = 1 << 20


def read_config_file(path: Path) -> dict[str, Any]:
    """Read a YAML (.yaml/.yml) or TOML (.toml) file into a dict."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(f"config file {path} is {size} bytes; the limit is {MAX_CONFIG_BYTES} (1 MiB)")
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text (invalid byte at position {exc.start})") from None
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else load_yaml(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        first = " ".join(str(exc).split()) or type(exc).__name__
        mark = getattr(exc, "problem_mark", None)
        if isinstance(exc, yaml.MarkedYAMLError) and exc.problem and mark is not None:
            first = f"{exc.problem} (line {mark.line + 1}, column {mark.column + 1})"
        raise ConfigError(f"config file {path} is not valid {'TOML' if path.suffix == '.toml' else 'YAML'}: {first}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of settings, not {type(data).__name__}")
    return data


def apply_options(data: dict[str, Any], given: list[tuple[str, tuple[str, ...], Any]], overrides: list[str], *,
                  said: dict[str, Callable[[Any], Any]] | None = None) -> None:
    """Each command-line option's value (``(option, settings path, value)``, None: not given) put at its path, then
    the ``--set`` assignments; a ``--set`` that changes what an option beside it said is refused (``--seeds 0,1 --set
    seeds.0=5``: which one counts would be a guess), one that refines it is kept (``--defenses iso --set
    audit.defenses.0.strengths=[1]``). What an option says is :func:`named` of its value, or ``said[option]`` of it
    (``--defense``: the swept defense's name, phase and that it is swept; a fixed one added beside it refines)."""
    said = said or {}
    given = [(option, path, value) for option, path, value in given if value is not None]
    before = [copy.deepcopy(value) for _, _, value in given]  # what each option set, before any --set edits it
    for option, (*sections, key), value in given:
        node = data
        for i, section in enumerate(sections):
            node = node.setdefault(section, {})
            if not isinstance(node, dict):  # a grid file's partition: 3 (evaluate's files are shape-checked first)
                raise ConfigError(f"{option} sets {'.'.join([*sections, key])}, but '{'.'.join(sections[:i + 1])}' is "
                                  "a value, not a section")
        node[key] = value
    apply_overrides(data, overrides)
    for (option, path, value), was in zip(given, before):
        now, says = _setting(data, path), said.get(option, named)
        now_says, was_says = says(now), says(was)
        if now_says != was_says and repr(now_says) != repr(was_says):  # nan is nan; replaced, or edited in place
            # (--set seeds.0=5, --defense iso --set defenses.0.sweep=false)
            raise ConfigError(f"{option} sets {'.'.join(path)}={shown(was)}, but a --set makes it "
                              f"{'unset' if now is None else shown(now)}; give one of them")


def named(value: Any) -> Any:
    """What an option set, as it names it: the names of a list of sections (defenses, whose other settings may be
    refined) and a list of names or numbers, each as a set with its repeats (``--attack mc,gc`` and ``attack.name=[gc,
    mc]`` are one choice, as are ``--defenses iso,mid`` and ``audit.defenses=[{name: mid}, {name: iso}]``), one item
    as that item (``[mc]`` is ``mc``); else the value itself."""
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return sorted((v.get("name") for v in value), key=repr)
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
        return value[0] if len(value) == 1 else sorted(value, key=repr)
    return value


def _setting(data: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path`` of the settings ``data``, or None where a ``--set`` replaced a section on the way."""
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``: sections merge key by key, anything else (values, lists) is replaced."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(out.get(key), dict) and isinstance(value, dict) else value
    return out


#: Preset key holding settings for some datasets only: ``{pattern: settings}``, fnmatch patterns on the dataset's
#: name, folded under a run's own settings (which win): the FedHSSL paper finetunes image data at batch 128 and
#: tabular data at 512, one preset for both. Only presets hold it (a pattern of the user's could match nothing).
DATASET_SETTINGS = "dataset_settings"


def resolve_dataset_settings(data: dict[str, Any], table: Any) -> None:
    """Fold the settings of every ``table`` pattern matching ``data``'s dataset (in order, later ones over earlier)
    under ``data``'s own settings, which win."""
    if not table:
        return
    if not isinstance(table, dict) or not all(isinstance(k, str) and isinstance(v, dict) for k, v in table.items()):
        raise ConfigError(f"{DATASET_SETTINGS} must map dataset-name patterns to settings, got {table!r}")
    dataset = data.get("dataset")
    name = dataset.get("name", "digits") if isinstance(dataset, dict) else "digits"
    found: dict[str, Any] = {}
    for pattern, settings in table.items():
        if isinstance(name, str) and fnmatch.fnmatchcase(name, pattern):
            found = merged(found, settings)
    if found:
        data.update(merged(found, data))


#: Experiment-file key holding options for some methods only: ``{pattern: options}``, fnmatch patterns on
#: the method's name (``fedhssl*``, ``local-simsiam``), so one file (a preset, a grid) serves several methods.
METHOD_OPTIONS = "method_options"


def resolve_method_options(data: dict[str, Any], *, must_match: set[str] | None = None) -> set[str]:
    """Remove ``data``'s ``method_options`` table and fold the options of every pattern matching the method's
    name (in file order) under ``method.options``; options given for the method itself win. Returns the patterns
    that matched; a pattern of ``must_match`` (the user's own, as opposed to a preset's, which serve other methods
    too) that matches nothing is refused (its options would be silently ignored)."""
    table = data.pop(METHOD_OPTIONS, None) or {}
    if not isinstance(table, dict) or not all(isinstance(k, str) and isinstance(v, dict) for k, v in table.items()):
        raise ConfigError(f"{METHOD_OPTIONS} must map method-name patterns to option sections, got {table!r}")
    method = data.setdefault("method", {})
    if not table or not isinstance(method, dict):
        return set()
    name = method.get("name", "splitnn")
    found: dict[str, Any] = {}
    matched = {p for p in table if isinstance(name, str) and fnmatch.fnmatchcase(name, p)}
    for pattern, options in table.items():
        if pattern in matched:
            found.update(options)
    if found:
        given = method.get("options", {})
        method["options"] = merged(found, given) if isinstance(given, dict) else given
    if must_match is not None:
        unmatched(must_match - matched, [name])
    return matched


def unmatched(patterns: set[str], methods: list) -> None:
    """Refuse ``method_options`` patterns that match none of ``methods``."""
    if patterns:
        raise ConfigError(f"{METHOD_OPTIONS} pattern(s) {', '.join(sorted(map(repr, patterns)))} match no method of this "
                          f"run ({', '.join(map(str, methods))}); their options would be ignored: fix the pattern or "
                          "remove it")


# ------------------------------------------------------------------------------------------- validation


def _inner(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """(the settings model an annotation holds, whether it is a list of them)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _inner(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        found = [_inner(a) for a in typing.get_args(annotation) if a is not type(None)]
        return next(((m, many) for m, many in found if m is not None), (None, False))
    if origin is list:
        model, _ = _inner(typing.get_args(annotation)[0])
        return model, model is not None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    return None, False


def check_shape(model: type[BaseModel], data: dict[str, Any], *, source: str) -> None:
    """Sections must be mappings and lists of sections lists of mappings, before anything merges into them."""
    for name, value in data.items():
        field = model.model_fields.get(name)
        if field is None:
            continue
        sub, many = _inner(field.annotation)
        if sub is None:
            continue
        items = value if many and isinstance(value, list) else [value]
        if many and not isinstance(value, list):
            raise ConfigError(f"{source}: {name} must be a list of sections, got {type(value).__name__} {value!r}")
        for i, item in enumerate(items):
            where = f"{name}[{i}]" if many else name
            if not isinstance(item, dict):
                example = ", ".join(list(sub.model_fields)[:3])
                raise ConfigError(f"{source}: {where} must be a section of settings ({example}, ...), "
                                  f"got {type(item).__name__} {item!r}")
            check_shape(sub, item, source=source)


def _section(model: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The settings model at ``loc`` (field names and list indices), or None past a free-form dict."""
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        sub, _ = _inner(field.annotation)
        if sub is None:
            return None
        model = sub
    return model


def _where(loc: tuple, prefix: str, sections: dict[str, str] | None = None) -> str:
    """``loc`` written as the user's path: after ``prefix``, its first part spelled as ``sections`` names it."""
    out = prefix.removesuffix(".")
    if loc and sections and loc[0] in sections:
        out, loc = f"{out}.{sections[loc[0]]}" if out else sections[loc[0]], loc[1:]
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "config"


def format_validation(exc: ValidationError, model: type[BaseModel], *, prefix: str = "",
                      sections: dict[str, str] | None = None) -> str:
    """One line for pydantic's first error: where (``sections`` respells top-level keys: ``search_space`` of one of
    several attacks is ``search_space.mc``), what, and the valid keys for an unknown one."""
    err = exc.errors()[0]
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    where = _where(loc, prefix, sections)
    message = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        section = _section(model, loc[:-1])
        fields = list(section.model_fields) if section is not None else []
        close = difflib.get_close_matches(str(loc[-1]), fields, n=1) if loc else []
        hint = f" (did you mean {close[0]}?)" if close else ""
        return f"unknown setting {where}{hint}; valid keys here: {', '.join(fields) or 'none'}"
    if err["type"] in ("model_type", "dict_type"):
        return f"{where} must be a section of settings, got {type(err['input']).__name__} {err['input']!r}"
    value = err.get("input")
    if err["type"] == "list_type" and isinstance(value, (int, float, str)):  # a bare value where a list is read
        return (f"{where} is a list, not the single value {value!r}: write it in brackets ([a, b] on the command "
                "line, a YAML list in a file)")
    shown = f"={value!r}" if isinstance(value, (int, float, str)) and not isinstance(value, bool) \
        and len(repr(value)) < 40 else ""
    return f"invalid {where}{shown}: {message}"


def validate(model: type[BaseModel], data: Any, *, prefix: str = "", context: str = "",
             sections: dict[str, str] | None = None) -> Any:
    """Validate ``data`` into ``model``, turning pydantic's report into one ConfigError line (after ``context``)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(context + format_validation(exc, model, prefix=prefix, sections=sections)) from None


def parse_options(cls: Any, options: dict[str, Any], *, where: str, context: dict | None = None) -> BaseModel:
    """A registered component's ``options`` validated against its ``Options`` (none: :class:`NoOptions`); a bad
    value names ``where`` (e.g. ``attack.options``)."""
    model = getattr(cls, "Options", NoOptions)
    try:
        return model.model_validate(options, context=context)
    except ValidationError as exc:
        raise ConfigError(format_validation(exc, model, prefix=f"{where}.")) from None


def check_space_values(cls: Any, name: str, given: dict[str, list], *, base: dict,
                       where: str = "attack.search_space") -> None:
    """Refuse a search space naming options attack ``name`` (class ``cls``) does not have or reads only in training
    (``training_options``), an empty list of values, a value its options refuse beside ``base`` (the options given),
    or an option no candidate reads, each named as ``where`` (as the user gave it)."""
    fields = cls.Options.model_fields
    stray = sorted(set(given) - set(fields))
    if stray:
        raise ConfigError(f"{where} names {', '.join(stray)}, not an option of attack '{name}'; its options: "
                          f"{', '.join(fields) or 'none'}")
    trained = getattr(cls, "training_options", frozenset())
    if acting := sorted(set(given) & trained):
        searchable = ", ".join(k for k in fields if k not in trained)
        options = where.replace("search_spaces", "attack_options").replace("search_space", "options")
        raise ConfigError(f"{where}.{acting[0]} is searched, but only the training of attack '{name}' reads it, "
                          f"which the search does not re-run (every candidate is scored on the one training); set "
                          f"{options}.{acting[0]} instead, or search its other options: {searchable}")
    for option, values in given.items():
        if not values:
            raise ConfigError(f"{where}.{option} is empty; give at least one value")
        for value in values:
            parse_options(cls, {**base, option: value}, where=where, context=CANDIDATE)
    check_candidates(cls, name, base, given, where=where)


def as_written(reason: str, options: str, space: str) -> str:
    """A planner's ``reason`` naming an attack's options and search space where the user wrote them (``options``,
    ``space``: e.g. ``audit.attack_options.fi-inversion``, ``audit.search_spaces.fi-inversion``)."""
    return reason.replace("attack.options.", f"{options}.").replace("attack.search_space.", f"{space}.")


def as_audited(reason: str, name: str) -> str:
    """A planner's ``reason`` naming attack ``name``'s settings where an audit's user wrote them (``audit.*``)."""
    keys = {"options": f"attack_options.{name}", "search_space": f"search_spaces.{name}"}
    return re.sub(r"\battack\.(options|search_space|search_budget|prior_epochs|prior_ssl|prior)\b",
                  lambda m: f"audit.{keys.get(m[1], m[1])}", reason)
