"""Building a component (method, defense, attack, auditor) from its class: a plugin's failure becomes one error."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from vflpriv.common.errors import ConfigError, VflprivError, class_named, exception_text

T = TypeVar("T")


def built(kind: str, name: str, make: Callable[[], T]) -> T:
    """``make()``, a component's constructor: vflpriv's own refusals pass through; anything else its code raises is a
    plugin failing, one error naming it (the original kept as the cause: ``vflpriv --debug`` shows its traceback)."""
    try:
        return make()
    except VflprivError:
        raise
    except Exception as exc:  # noqa: BLE001 - a plugin's own code
        raise ConfigError(f"{kind} '{name}' failed to start: {class_named(exc)}: {exception_text(exc)}") from exc
