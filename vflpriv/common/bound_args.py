"""The canary bounds' arguments, checked where a caller (a table, a plugin) hands them in: a ValueError naming the
argument and its valid range, never a bound computed from numbers no audit produces (more right guesses than
guesses, a negative or fractional count, one class, delta outside [0, 1], a NaN or infinite claim). Each check is a
few comparisons, so the bounds run them on every call."""

from __future__ import annotations

import math
from numbers import Integral, Real


def count(name: str, value: object, *, least: int = 0) -> None:
    """``value`` is an integer (not a bool) of at least ``least``."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < least:
        raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")


def counts(*, guesses: object, right: object, canaries: object) -> None:
    """Counts one scoring of canaries can give: integers with 0 <= right <= guesses <= canaries."""
    for name, value in (("guesses", guesses), ("right", right), ("canaries", canaries)):
        if isinstance(value, bool) or not isinstance(value, Integral):
            raise ValueError(f"{name} must be an integer, got {value!r}")
    if not 0 <= right <= guesses <= canaries:
        raise ValueError(f"need 0 <= right <= guesses <= canaries, got right={right}, guesses={guesses}, "
                         f"canaries={canaries}")


def classes(value: object) -> None:
    """A canary's label has at least two candidates (one is no secret)."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 2:
        raise ValueError(f"classes must be an integer >= 2 (need at least 2 candidates per canary), got {value!r}")


def delta(value: object, *, below_one: bool = False) -> None:
    """A DP delta: a number in [0, 1] ((eps, 1)-DP holds for every mechanism, so no count rejects it), or in [0, 1)
    where a claim must be testable (``below_one``)."""
    if isinstance(value, bool) or not isinstance(value, Real) or not 0 <= value <= 1 or (below_one and value == 1):
        raise ValueError(f"delta must be a number in [0, {'1)' if below_one else '1]'}, got {value!r}")


def alpha(value: object) -> None:
    """A test's level: a number in (0, 1] (the f-DP p-value searches up to level 1)."""
    if isinstance(value, bool) or not isinstance(value, Real) or not 0 < value <= 1:
        raise ValueError(f"alpha must be a number in (0, 1], got {value!r}")


def epsilon(value: object, *, name: str = "epsilon") -> None:
    """An epsilon to test or bound: a finite number >= 0 (NaN and infinity state no claim a test can reject)."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


#: The checks under names that :func:`cap`'s keywords (the bounds' own argument names) do not shadow.
_check_classes, _check_alpha = classes, alpha


def cap(*, canaries: object, classes: object, menu: object, attacks: object, alpha: object) -> None:
    """A cap's numbers, as both tests' caps take them: a count of canaries, at least two classes, at least one menu
    entry and one attack (the Bonferroni shares), a level in (0, 1]."""
    count("canaries", canaries)
    _check_classes(classes)
    count("menu", menu, least=1)
    count("attacks", attacks, least=1)
    _check_alpha(alpha)
