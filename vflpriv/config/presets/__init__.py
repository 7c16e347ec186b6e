"""Named presets: experiment files shipped with vflpriv (``--preset NAME``, ``vflpriv list presets``).

A preset is an ordinary experiment file; the command line's ``--config`` file, options and ``--set``
override it. Its ``description`` key says what it reproduces and where each value comes from. Settings that
only some methods accept go under ``method_options`` (method-name pattern -> options; see
:func:`vflpriv.config.parse.resolve_method_options`), so one preset serves a grid of methods.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vflpriv.common.errors import ConfigError
from vflpriv.config.parse import DATASET_SETTINGS, METHOD_OPTIONS, merged, read_config_file

FOLDER = Path(__file__).parent


def names() -> list[str]:
    return sorted(p.stem for p in FOLDER.glob("*.yaml"))


def load(name: str) -> dict[str, Any]:
    """The preset's settings (without its description); unknown names list the valid ones."""
    if name not in names():
        raise ConfigError(f"unknown preset '{name}'; valid presets: {', '.join(names())}")
    data = read_config_file(FOLDER / f"{name}.yaml")
    data.pop("description", None)
    return data


def description(name: str) -> str:
    load(name)  # the same error for an unknown name
    return " ".join(str(read_config_file(FOLDER / f"{name}.yaml").get("description", "")).split())


def settings(*, preset: str | None, config: Path | None) -> dict[str, Any]:
    """A command's settings from files: the preset, then the config file over it (which may not hold the preset's
    ``dataset_settings``: :func:`vflpriv.config.parse.resolve_dataset_settings`)."""
    base = load(preset) if preset else {}
    own = read_config_file(config) if config else {}
    if DATASET_SETTINGS in own:
        raise ConfigError(f"config file {config}: {DATASET_SETTINGS} is a preset's key (settings per dataset of a "
                          "grid); set the settings themselves, for the dataset of this file")
    return merged(base, own)


def user_patterns(data: dict[str, Any], preset: str | None) -> set[str]:
    """The ``method_options`` patterns of ``data`` that the preset did not bring (the user's own: each must match
    a method of the run; a preset's patterns serve the methods of a whole grid)."""
    table = data.get(METHOD_OPTIONS) or {}
    brought = set((load(preset).get(METHOD_OPTIONS) or {}) if preset else ())
    return {p for p in table if isinstance(p, str)} - brought if isinstance(table, dict) else set()


#: ``vflpriv describe`` reads presets like a registry: ``names()`` and ``get(name)``.
get = load
