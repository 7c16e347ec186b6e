"""Turning a registered component plus an options dict into its validated ``Options``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from vflpriv.config_io import format_validation
from vflpriv.errors import ConfigError
from vflpriv.options import NoOptions


def parse_options(cls: Any, options: dict[str, Any], *, where: str) -> BaseModel:
    """Validate ``options`` against ``cls.Options``; a bad value names ``where`` (e.g. ``attack.options``)."""
    model = getattr(cls, "Options", NoOptions)
    try:
        return model.model_validate(options)
    except ValidationError as exc:
        raise ConfigError(format_validation(exc, model, prefix=f"{where}.")) from None
