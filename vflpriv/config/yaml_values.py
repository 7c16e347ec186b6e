"""YAML as vflpriv reads it, config files and ``--set`` values alike: no aliases, no key given twice, numbers
written plainly (as ``--seeds`` reads them)."""

from __future__ import annotations

import re
from typing import Any

import yaml


class _NoAliasLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing aliases (``*name``) before they are expanded, and a key given twice in one
    mapping (PyYAML keeps the last value silently: a user's ``labeled: 100`` became 200)."""

    def compose_node(self, parent, index):  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed in vflpriv config files",
                                              mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):  # type: ignore[override]
        seen: dict = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is given twice in one section (first on line {seen[key] + 1})",
                    key_node.start_mark)
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def unplain(text: str) -> bool:
    """Whether a number as typed holds what int(), float() and pydantic read but ``--seeds`` refuses: a digit that is
    no ASCII digit ('٣') or a '_' separator ('1_000'); refused on the command line, options and ``--set`` alike."""
    return not text.isascii() or "_" in text


class UnplainNumber(ValueError):
    """A number YAML reads from another spelling than plain decimal (:data:`_PLAIN`); its text and where it stands."""

    def __init__(self, text: str, mark: Any = None) -> None:
        super().__init__(text)
        self.mark = mark


#: What a number not written plainly is told, wherever it is read (``--set``, a config file, a number field).
PLAIN_RULE = "write ASCII decimal digits without '_', ':', a leading 0 or a 0x/0o/0b prefix (e.g. 1000, 0.5, 1e-05)"

#: A number as ``--seeds`` and ``--strengths`` read it: decimal, no leading 0 (YAML 1.1 reads ``017`` as octal 15),
#: no base 60 (``1:30`` is 90), no 0x/0o/0b, no '_' (``1_000``); YAML's .inf and .nan.
_PLAIN = re.compile(r"[-+]?(0|[1-9][0-9]*)(\.[0-9]*)?([eE][-+]?[0-9]+)?|[-+]?\.[0-9]+([eE][-+]?[0-9]+)?"
                    r"|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)")


class _PlainLoader(_NoAliasLoader):
    """The loader of every YAML vflpriv reads (config and grid files, ``--set`` values): an unquoted number not
    written plainly (:data:`_PLAIN`) is refused (:class:`UnplainNumber`) rather than read as YAML 1.1 reads it
    (``017`` as 15, ``1:00`` as 60, ``1_000``), where ``--seeds`` refuses it or reads it otherwise. A quoted
    scalar is text; a number field refuses an unplain one itself (``config.options``)."""


def _plain_number(loader: _PlainLoader, node: yaml.ScalarNode) -> Any:
    text = loader.construct_scalar(node)
    if unplain(text) or not _PLAIN.fullmatch(text):
        raise UnplainNumber(text, node.start_mark)
    return (loader.construct_yaml_int if node.tag.endswith(":int") else loader.construct_yaml_float)(node)


_PlainLoader.add_constructor("tag:yaml.org,2002:int", _plain_number)
_PlainLoader.add_constructor("tag:yaml.org,2002:float", _plain_number)
#: An unquoted ``08`` or ``09`` (YAML 1.1's text: no octal) is a number with a leading 0, as ``07`` is: one rule.
_PlainLoader.add_implicit_resolver("tag:yaml.org,2002:int", re.compile(r"^[-+]?0[0-9]+$"), list("-+0"))


def load_yaml(text: str) -> Any:
    """A config or grid file's YAML; an unplain number is a YAML error at its line (:class:`_PlainLoader`)."""
    try:
        return yaml.load(text, Loader=_PlainLoader)  # noqa: S506 - a SafeLoader subclass
    except UnplainNumber as exc:
        shown = ascii(str(exc))[1:-1][:40]
        raise yaml.constructor.ConstructorError(None, None, f"{shown} is no plain number; {PLAIN_RULE}",
                                                exc.mark) from None


def load_set_value(raw: str) -> Any:
    """A ``--set`` value as YAML, its numbers written plainly (:class:`UnplainNumber` where one is not)."""
    return yaml.load(raw, Loader=_PlainLoader)  # noqa: S506 - a SafeLoader subclass
