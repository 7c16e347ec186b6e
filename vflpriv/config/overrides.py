"""``--set key.path=value`` assignments: their keys read to one spelling, two values for one setting refused."""

from __future__ import annotations

import re
from typing import Any

import yaml

from vflpriv.common.errors import ConfigError
from vflpriv.config.yaml_values import UnplainNumber, load_set_value


def shown(value: Any) -> str:
    """A setting as ``--set`` spells it (flow YAML: ``full``, ``[0, 1]``, ``true``)."""
    return yaml.safe_dump(value, default_flow_style=True, width=10**6).strip().removesuffix("\n...").strip()


#: A ``--set`` key: names joined by '.', each followed by any number of bracketed list indices (``grid[0][1]``).
_KEY = re.compile(r"[^.\[\]]+(?:\[[^\[\]]*\])*(?:\.[^.\[\]]+(?:\[[^\[\]]*\])*)*")
#: One part of a ``--set`` key: a bracket's content (``0`` of ``defenses[0]``, ``0.5`` of ``defenses[0.5]``), or a name.
_PART = re.compile(r"\[([^\[\]]*)\]|([^.\[\]]+)")


def set_path(key: str) -> tuple[str, ...] | None:
    """A ``--set`` key's parts, brackets read before splitting on '.' (``defenses[0].options.clip`` and
    ``defenses.0.options.clip`` are one path; ``defenses[0.5]`` has the index ``0.5``); None for a malformed key."""
    if not _KEY.fullmatch(key):
        return None
    return tuple(index or name for index, name in _PART.findall(key))


def _parsed(assignment: str) -> tuple[str, tuple[str, ...], Any]:
    """A ``key.path=value`` assignment as (key, its path, its value parsed as YAML)."""
    key, sep, raw = assignment.partition("=")
    parts = set_path(key)
    if not sep or parts is None:
        raise ConfigError(f"--set expects key.path=value (a list's index as .0 or [0]), got '{assignment}'")
    try:
        value = load_set_value(raw)
    except yaml.YAMLError:
        value = raw
    except UnplainNumber as exc:
        raise ConfigError(f"--set {assignment}: {ascii(str(exc))[1:-1][:40]} is no plain number; write ASCII decimal "
                          "digits without '_', ':', a leading 0 or a 0x/0o/0b prefix (e.g. 1000, 0.5, 1e-05)") from None
    return key, parts, value


def apply_override(data: dict[str, Any], assignment: str) -> None:
    """Apply one ``key.path=value`` (value parsed as YAML: numbers, booleans, lists) in place; a number in the path
    indexes a list of sections (``defenses.0.options.clip=0.5``), also in brackets as errors print it
    (``defenses[0].options.clip=0.5``)."""
    key, parts, value = _parsed(assignment)
    node: Any = data
    for i, part in enumerate(parts):
        where = ".".join(parts[: i + 1])
        if isinstance(node, list):  # defenses.0.options.clip: an entry of a list of sections, by index
            if not (part.isascii() and part.isdigit()) or int(part) >= len(node):
                raise ConfigError(f"--set {key}: '{'.'.join(parts[:i])}' is a list of {len(node)}; give an index "
                                  f"0..{len(node) - 1}, got '{part}'")
            if i == len(parts) - 1:
                node[int(part)] = value
                return
            node = node[int(part)]
            continue
        if not isinstance(node, dict):
            raise ConfigError(f"--set {key}: '{'.'.join(parts[:i])}' is a value, not a section")
        if i == len(parts) - 1:
            node[part] = value
            return
        node = node.setdefault(part, {})
        if not isinstance(node, (dict, list)):
            raise ConfigError(f"--set {key}: '{where}' is a value, not a section")


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> None:
    """Apply the ``--set`` assignments in order, after refusing two values for one setting, in one spelling or two
    (``defenses[0].options.clip`` is ``defenses.0.options.clip``), or a setting inside a section set whole (which
    one counts would depend on their order); an identical repeat passes."""
    parsed = [(assignment, *_parsed(assignment)[1:]) for assignment in overrides]
    for i, now in enumerate(parsed):
        for earlier in parsed[:i]:
            _refuse_both(earlier, now)
    for assignment in overrides:
        apply_override(data, assignment)


def _refuse_both(earlier: tuple[str, tuple[str, ...], Any], now: tuple[str, tuple[str, ...], Any]) -> None:
    """Refuse two assignments (as written, path, value) of one setting with two values, or one inside the other."""
    if earlier[1] == now[1]:
        if shown(earlier[2]) != shown(now[2]):
            raise ConfigError(f"--set {'.'.join(now[1])} is given twice ({shown(earlier[2])[:60]}, "
                              f"{shown(now[2])[:60]}); give it once")
        return
    outer, inner = sorted((earlier, now), key=lambda assignment: len(assignment[1]))
    if inner[1][:len(outer[1])] != outer[1]:
        return
    if not isinstance(outer[2], (dict, list)):  # a value where the other reads a section
        raise ConfigError(f"--set {inner[0].partition('=')[0]}: '{'.'.join(outer[1])}' is a value, not a section "
                          f"('--set {outer[0]}')")
    raise ConfigError(f"'--set {inner[0]}' is inside the section '--set {outer[0]}' sets whole; give the setting "
                      "once: in the section, or the section's settings as keys")
