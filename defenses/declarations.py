"""Which code of a defense's class is not vflpriv's own and has not declared what it reads of a secret beside it: such
code is taken to read the secret (fail closed, as ``vflpriv.methods.base.own_code`` does for methods: review eps F2)."""

from __future__ import annotations

from vflpriv.common.declarations import plain_data, uncovered_code, undeclared_clause, vflpriv_own
from vflpriv.common.errors import ConfigError
from vflpriv.common.secret_kinds import SECRETS

#: What a defense's class may define without declaring its reads beside it: the declarations themselves, and what
#: runs no code on a secret (its options model, the instance's attribute dictionary).
DECLARATIONS = frozenset({"Options", "reads_labels", "reads_features", "__dict__", "__weakref__"})


def foreign_code(cls: type, than: str) -> list[str]:
    """The code of ``cls`` that is not vflpriv's own and that its effective ``than`` (``reads_labels``,
    ``reads_features``) does not cover (:func:`vflpriv.common.declarations.uncovered_code`)."""
    return uncovered_code(cls, than, exempt=DECLARATIONS, trusted=vflpriv_own)


def undeclared(cls: type, than: str, what: str) -> tuple[str, ...]:
    """One clause naming the class's code without ``than`` declared beside it, or ``()``."""
    return undeclared_clause(foreign_code(cls, than), f"declares no {what} reads beside it (Protection.{than} in its "
                                                      f"class), so what it does with the {what}s is unknown")


def declared_secrets(defense: object) -> frozenset[str]:
    """The ``secrets`` a defense class (or instance) names, checked to be a set of :data:`SECRETS`: a typo, a string or
    a property failed deep in planning or ``describe`` with a traceback (review l6 L6)."""
    cls = defense if isinstance(defense, type) else type(defense)
    value = getattr(defense, "secrets", None)
    if (type(value) is set or type(value) is frozenset) and all(type(s) is str and s in SECRETS for s in value):
        return frozenset(value)  # exact types: a subclass's comparison ran plugin code in planning (review l13 3)
    shown = repr(value)[:60] if plain_data(value) else f"a {type(value).__name__}"
    raise ConfigError(f"defense class {cls.__module__}.{cls.__qualname__}: its secrets are {shown}; give a "
                      f"set or frozenset of {', '.join(map(repr, SECRETS))} (the secrets it claims to protect), or an "
                      "empty one")


def declared_read(cls: type, name: str) -> bool:
    """Whether any class of ``cls``'s MRO declares the read ``name`` (``reads_labels``, ``reads_features``): a
    subclass adds a read, never removes one (a code-free Marvell subclass saying ``reads_labels = False`` still solves
    its noise from the labels: review l10 3)."""
    return any(bool(vars(k).get(name, False)) for k in cls.__mro__)
