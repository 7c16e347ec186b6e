"""The strict base of every settings model: the run configuration and each component's ``Options``.

One rule set for every number a user can type: unknown keys are refused, floats must be finite
(``inf``, ``nan`` and overflowing literals such as ``1e400`` are refused with "finite number"), and
integers must fit a C ``int`` (a larger count cannot be a sensible epoch count or batch size, and
would only fail deep inside torch).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

#: The largest integer any setting accepts.
MAX_INT = 2**31 - 1


def _check_int(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        raise ValueError(f"integer too large (at most {MAX_INT})")
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_int(item)
    return value


class Options(BaseModel):
    """Base of a component's options and of every config section: strict keys, finite numbers."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, validate_assignment=True)

    @field_validator("*", mode="after")
    @classmethod
    def _bounded_integers(cls, value: Any) -> Any:
        return _check_int(value)


class NoOptions(Options):
    """Options model of a component that takes none."""
