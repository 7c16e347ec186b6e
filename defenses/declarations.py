"""Which code of a defense's class is not vflpriv's own and has not declared what it reads of a secret beside it: such
code is taken to read the secret (fail closed, as ``vflpriv.methods.base.own_code`` does for methods: review eps F2)."""

from __future__ import annotations

import sys
from pathlib import Path

from vflpriv.common.declarations import uncovered_code, undeclared_clause

#: What a defense's class may define without declaring its reads beside it: the declarations themselves, and what
#: runs no code on a secret (its options model, the instance's attribute dictionary).
DECLARATIONS = frozenset({"Options", "reads_labels", "reads_features", "__dict__", "__weakref__"})


def vflpriv_own(k: type) -> bool:
    """Whether class ``k`` is vflpriv's own code: its module's file lies in vflpriv's package folders and defines it
    (``__module__`` alone can name any module: review eps2 G6); its reads are read and declared."""
    defined = sys.modules.get(k.__module__)
    for part in k.__qualname__.split("."):
        defined = getattr(defined, part, None)
    return defined is k and _in_vflpriv(k.__module__)


def _in_vflpriv(name: str) -> bool:
    """Whether module ``name``'s file lies in vflpriv's folders: its own, or its top-level subpackage's (a folder of
    the checkout installed as ``vflpriv.X``)."""
    file, parts = getattr(sys.modules.get(name), "__file__", None), name.split(".")
    if not file or parts[0] != "vflpriv":
        return False
    folders = [*sys.modules["vflpriv"].__path__, *getattr(sys.modules.get(".".join(parts[:2])), "__path__", ())]
    return any(Path(file).resolve().is_relative_to(Path(f).resolve()) for f in folders)


def foreign_code(cls: type, than: str) -> list[str]:
    """The code of ``cls`` that is not vflpriv's own and that its effective ``than`` (``reads_labels``,
    ``reads_features``) does not cover (:func:`vflpriv.common.declarations.uncovered_code`)."""
    return uncovered_code(cls, than, exempt=DECLARATIONS, trusted=vflpriv_own)


def undeclared(cls: type, than: str, what: str) -> tuple[str, ...]:
    """One clause naming the class's code without ``than`` declared beside it, or ``()``."""
    return undeclared_clause(foreign_code(cls, than), f"declares no {what} reads beside it (Protection.{than} in its "
                                                      f"class), so what it does with the {what}s is unknown")
