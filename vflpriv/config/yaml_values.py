"""YAML as vflpriv reads it: config files without aliases or a key given twice, and ``--set`` values whose numbers are
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
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed in vflpriv config files", mark)
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


def load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass


def unplain(text: str) -> bool:
    """Whether a number as typed holds what int(), float() and pydantic read but ``--seeds`` refuses: a digit that is
    no ASCII digit ('٣') or a '_' separator ('1_000'); refused on the command line, options and ``--set`` alike."""
    return not text.isascii() or "_" in text


class UnplainNumber(ValueError):
    """A ``--set`` value's number YAML reads from another spelling than plain decimal (:data:`_PLAIN`)."""


#: A number of a ``--set`` value as ``--seeds`` and ``--strengths`` read it: decimal, no leading 0 (YAML 1.1 reads
#: ``017`` as octal 15), no base 60 (``1:30`` is 90), no 0x/0o/0b, no '_' (``1_000``); YAML's .inf and .nan.
_PLAIN = re.compile(r"[-+]?(0|[1-9][0-9]*)(\.[0-9]*)?([eE][-+]?[0-9]+)?|[-+]?\.[0-9]+([eE][-+]?[0-9]+)?"
                    r"|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)")


class _SetLoader(_NoAliasLoader):
    """A ``--set`` value's loader: a number not written plainly (:data:`_PLAIN`) is refused (:class:`UnplainNumber`)
    rather than read as YAML 1.1 reads it, where ``--seeds 1_000`` or ``--seeds 017`` is refused or read otherwise."""


def _plain_number(loader: _SetLoader, node: yaml.ScalarNode) -> Any:
    text = loader.construct_scalar(node)
    if unplain(text) or not _PLAIN.fullmatch(text):
        raise UnplainNumber(text)
    return (loader.construct_yaml_int if node.tag.endswith(":int") else loader.construct_yaml_float)(node)


def _plain_text(loader: _SetLoader, node: yaml.ScalarNode) -> str:
    """A text that float() reads as a number with a '_' separator (``'1_000'``): pydantic reads it as one (a digit
    that is no ASCII digit it refuses, as the setting's own check does: ``attack.adversary``)."""
    text = loader.construct_yaml_str(node)
    try:
        number = "_" in text and float(text) is not None
    except ValueError:
        number = False
    if number:
        raise UnplainNumber(text)
    return text


_SetLoader.add_constructor("tag:yaml.org,2002:int", _plain_number)
_SetLoader.add_constructor("tag:yaml.org,2002:float", _plain_number)
_SetLoader.add_constructor("tag:yaml.org,2002:str", _plain_text)


def load_set_value(raw: str) -> Any:
    """A ``--set`` value as YAML, its numbers written plainly (:class:`UnplainNumber` where one is not)."""
    return yaml.load(raw, Loader=_SetLoader)  # noqa: S506 - a SafeLoader subclass
