"""cosmic-ray operators that its core set lacks, for vflpriv's mutation testing (``scripts/mutation.py``).

``ReplaceStringConstant`` changes a string literal's value (mutmut's string mutation: ``"name"`` -> ``"XXnameXX"``):
a seed stream's name (``generator(seed, "attack:sampler")``: another name draws another stream), a column or option
key, a registry name, a mode compared against. Left alone, as no test of a number could or should tell them apart:
docstrings and other bare string statements, the message of a ``raise`` (refusal tests match their message in part),
f-strings (not a constant) and byte strings.
"""

from __future__ import annotations

import parso.python.tree
from cosmic_ray.operators.operator import Example, Operator

MARK = "XX"


def _quote(value: str) -> tuple[str, str, str]:
    """(prefix, quote, body) of a string literal's source text, e.g. ``r'''a'''`` -> ("r", "'''", "a")."""
    start = next(i for i, c in enumerate(value) if c in "'\"")
    quote = value[start:start + 3] if value[start:start + 3] in ('"""', "'''") else value[start]
    return value[:start], quote, value[start + len(quote):len(value) - len(quote)]


def _in_raise(node) -> bool:
    parent = node.parent
    while parent is not None and parent.type not in ("funcdef", "classdef", "file_input"):
        if parent.type == "raise_stmt":
            return True
        parent = parent.parent
    return False


def _bare_statement(node) -> bool:
    """A docstring, or any string that is a statement of its own (concatenated pieces included)."""
    top = node.parent if node.parent is not None and node.parent.type == "strings" else node
    return top.parent is not None and top.parent.type == "simple_stmt" and top.parent.children[0] is top


class ReplaceStringConstant(Operator):
    """A string literal's value changed by marks at both ends (one mutant per literal)."""

    def mutation_positions(self, node):
        if isinstance(node, parso.python.tree.String) and "b" not in _quote(node.value)[0].lower() \
                and not _bare_statement(node) and not _in_raise(node):
            yield (node.start_pos, node.end_pos)

    def mutate(self, node, index):
        prefix, quote, body = _quote(node.value)
        return parso.python.tree.String(f"{prefix}{quote}{MARK}{body}{MARK}{quote}", node.start_pos,
                                         prefix=node.prefix)

    @classmethod
    def examples(cls):
        return (
            Example('g = generator(seed, "attack:sampler")', 'g = generator(seed, "XXattack:samplerXX")'),
            Example("x = r'a\\d'", "x = r'XXa\\dXX'"),
            Example('x = ""', 'x = "XXXX"'),
            Example('x = "a" "b"', 'x = "a" "XXbXX"', occurrence=1),
        )


class Provider:
    """The operator provider cosmic-ray finds through the ``cosmic_ray.operator_providers`` entry point."""

    _operators = {"ReplaceStringConstant": ReplaceStringConstant}

    def __iter__(self):
        return iter(self._operators)

    def __getitem__(self, name):
        return self._operators[name]
