"""Which code of a defense's class is not vflpriv's own and has not declared what it reads of a secret beside it: such
code is taken to read the secret (fail closed, as ``vflpriv.methods.base.own_code`` does for methods: review eps F2)."""

from __future__ import annotations

import abc

#: What a defense's class may define without declaring its reads beside it: the declarations themselves, and what
#: runs no code on a secret (its options model, the instance's attribute dictionary).
DECLARATIONS = frozenset({"Options", "reads_labels", "reads_features", "__dict__", "__weakref__"})


def vflpriv_own(k: type) -> bool:
    """Whether class ``k`` is vflpriv's own code (defined in one of its packages): its reads are read and declared."""
    return k.__module__ == "vflpriv" or k.__module__.startswith("vflpriv.")


def _code(k: type) -> list[str]:
    """The functions (or other callables or descriptors) class ``k`` defines, bar :data:`DECLARATIONS`."""
    return [f"{k.__name__}.{name}()" for name, value in vars(k).items()
            if (callable(value) or hasattr(value, "__get__")) and name not in DECLARATIONS]


def foreign_code(cls: type, than: str) -> list[str]:
    """The code of ``cls`` that is not vflpriv's own and that its effective ``than`` (``reads_labels``,
    ``reads_features``: the first class of the MRO defining it) does not cover, as ``Class.name()``: every function of
    a class the declaring class does not inherit from, and a metaclass's code."""
    declaring = next(k for k in cls.__mro__ if than in vars(k))
    found = [c for k in cls.__mro__ if not issubclass(declaring, k) and not vflpriv_own(k) for c in _code(k)]
    return found + [c for meta in type(cls).__mro__ if meta not in (type, object, abc.ABCMeta) and not vflpriv_own(meta)
                    for c in _code(meta)]


def undeclared(cls: type, than: str, what: str) -> tuple[str, ...]:
    """One clause naming the class's code without ``than`` declared beside it, or ``()``."""
    code = foreign_code(cls, than)
    if not code:
        return ()
    named = ", ".join(code[:6]) + (f" and {len(code) - 6} more" if len(code) > 6 else "")
    return (f"its own code ({named}) declares no {what} reads beside it (Protection.{than} in its class), so what it "
            f"does with the {what}s is unknown",)
