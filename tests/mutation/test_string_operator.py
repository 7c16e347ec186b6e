"""vflpriv's cosmic-ray operator for string constants: one mutant per literal that a number can depend on (a seed
stream's name, a key), none for docstrings, raise messages, f-strings or bytes. Skips where cosmic-ray (the
``mutation`` extra) is not installed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("cosmic_ray")
from cosmic_ray.mutating import mutate_code  # noqa: E402

PLUGIN = Path(__file__).resolve().parents[2] / "scripts" / "mutation_operators" / "vflpriv_mutation_operators.py"


def _operator():
    spec = importlib.util.spec_from_file_location("vflpriv_mutation_operators", PLUGIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ReplaceStringConstant()


def _all(source: str) -> list[str]:
    op, found = _operator(), []
    while (code := mutate_code(source, op, len(found))) is not None:
        found.append(code)
    return found


def test_the_operator_s_own_examples_hold():
    op = _operator()
    for example in op.examples():
        assert mutate_code(example.pre_mutation_code, op, example.occurrence) == example.post_mutation_code


def test_a_seed_stream_s_name_and_a_key_are_mutated_and_messages_docstrings_f_strings_and_bytes_are_not():
    source = '''def f(seed, x, frame):
    """Docstring."""
    "a bare string"
    g = generator(seed, "attack:sampler")
    t = f"{x} units"
    u = b"raw"
    if x < 0:
        raise ValueError("x is negative: " + str(x))
    return frame["prior_accuracy"]
'''
    mutants = _all(source)
    changed = [[b for a, b in zip(source.splitlines(), m.splitlines()) if a != b] for m in mutants]
    assert changed == [['    g = generator(seed, "XXattack:samplerXX")'], ['    return frame["XXprior_accuracyXX"]']]
    for m in mutants:
        compile(m, "m.py", "exec")


def test_the_plugin_is_what_cosmic_ray_lists_once_installed():
    from cosmic_ray.plugins import operator_names

    if "vflpriv/ReplaceStringConstant" not in operator_names():
        pytest.skip("the operator plugin is not installed (pip install -e scripts/mutation_operators)")
    from cosmic_ray.plugins import get_operator

    assert get_operator("vflpriv/ReplaceStringConstant").__name__ == "ReplaceStringConstant"
