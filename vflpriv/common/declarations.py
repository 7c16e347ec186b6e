"""Which code of a plugin's class its declarations do not cover (fail closed): the one walk that methods
(``label_uses``, ``feature_uses``) and defenses (``reads_labels``, ``reads_features``) share, so that the code an
epsilon rests on is judged by one rule (reviews fin F5, eps F2)."""

from __future__ import annotations

import abc
from collections.abc import Callable


def class_code(k: type, exempt: frozenset[str]) -> list[str]:
    """The functions (or other callables or descriptors) class ``k`` defines, bar the ``exempt`` names."""
    return [f"{k.__name__}.{name}()" for name, value in vars(k).items()
            if (callable(value) or hasattr(value, "__get__")) and name not in exempt]


def uncovered_code(cls: type, than: str, *, exempt: frozenset[str],
                   trusted: Callable[[type], bool] = lambda k: False) -> list[str]:
    """The code of ``cls`` that its effective ``than`` (the first class of the MRO defining it) does not cover, as
    ``Class.name()``: every function of a class the declaring class does not inherit from, and a metaclass's code;
    ``trusted`` classes (vflpriv's own, for defenses) are left out."""
    declaring = next(k for k in cls.__mro__ if than in vars(k))
    found = [c for k in cls.__mro__ if not issubclass(declaring, k) and not trusted(k) for c in class_code(k, exempt)]
    return found + [c for meta in type(cls).__mro__ if meta not in (type, object, abc.ABCMeta) and not trusted(meta)
                    for c in class_code(meta, exempt)]


def undeclared_clause(code: list[str], text: str) -> tuple[str, ...]:
    """One clause naming ``code`` (at most six of its names) before ``text``, or ``()`` where there is none."""
    if not code:
        return ()
    named = ", ".join(code[:6]) + (f" and {len(code) - 6} more" if len(code) > 6 else "")
    return (f"its own code ({named}) {text}",)
