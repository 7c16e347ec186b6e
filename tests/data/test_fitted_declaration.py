"""Review hunt H1-H3: a plugin dataset's ``fitted_features`` (a dict, a str, a huge text, one changed after the dataset
was made) crashed planning or was quoted whole into every record: checked where read, one error line naming it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from vflpriv.config.registry import DATASETS
from vflpriv.data import embedded, load
from vflpriv.data.base import VerticalDataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_helpers import refused_in_planning  # noqa: E402

PLAN = ["--attack", "fi-decoder", "--defense", "embedding-dp", "--strengths", "0.5", "--seeds", "0", "--out", "o"]


def _digits(fitted) -> VerticalDataset:
    d = embedded.load_digits()
    return VerticalDataset("t-fitted", d.x_train, d.y_train, d.x_test, d.y_test, d.num_classes, d.specs,
                           fitted_features=fitted)


@pytest.fixture
def plugin(monkeypatch):
    """Register 't-fitted', a loader returning what the maker given to the returned function makes."""
    made = {}
    monkeypatch.setitem(DATASETS._extra, "t-fitted", lambda **kwargs: made["dataset"]())
    load._load.cache_clear()
    yield lambda make: made.update(dataset=make)
    load._load.cache_clear()


def _shortened() -> VerticalDataset:
    dataset = _digits(("", ""))
    object.__setattr__(dataset, "fitted_features", ("",))  # a plugin changing it after construction
    return dataset


def test_a_dict_or_a_declaration_changed_after_construction_is_refused_in_planning(plugin, tmp_path, monkeypatch):
    plugin(lambda: _digits({"p0": "", "p1": ""}))
    out = refused_in_planning(["evaluate", "--dataset", "t-fitted", *PLAN], "t-fitted", tmp_path, monkeypatch)
    assert "got a dict" in out and "tuple or list" in out
    refused_in_planning(["audit", "--method", "splitnn", "--dataset", "t-fitted", "--quick", "--out", "a"],
                        "got a dict", tmp_path, monkeypatch)
    plugin(_shortened)
    out = refused_in_planning(["evaluate", "--dataset", "t-fitted", *PLAN], "t-fitted", tmp_path, monkeypatch)
    assert "got 1 entries for 2 parties" in out


def test_a_list_declaration_is_kept_as_a_tuple():
    assert _digits(["", "x"]).fitted_features == ("", "x")


def test_a_plain_string_is_not_one_declaration_per_party():
    """Review hunt H2: "ab" for two parties was read letter by letter (party 1's features 'are b')."""
    with pytest.raises(ValueError, match="fitted_features got a str; valid: None .* or a tuple or list of 2 str"):
        _digits("ab")


def test_a_declaration_longer_than_the_limit_is_refused():
    """Review hunt H3: a 6.5 MB declaration was quoted whole in every record's notes and on the terminal."""
    from vflpriv.data.base import MAX_DECLARED

    assert _digits(("", "x" * MAX_DECLARED)).fitted_features[1] == "x" * MAX_DECLARED
    with pytest.raises(ValueError, match=f"got {MAX_DECLARED + 1} characters for party 1; .* at most {MAX_DECLARED}"):
        _digits(("", "x" * (MAX_DECLARED + 1)))


@pytest.mark.parametrize("char", ["\n", "\r", "\x0b", "\x1b", "\x1c", "\x85", "\x7f", "\u2028", "\u2029"])
def test_a_declaration_with_a_control_character_or_a_newline_is_refused(char):
    """A newline (or another control character) in a declaration split the note quoting it over lines."""
    with pytest.raises(ValueError, match=f"U\\+{ord(char):04X} at position 4 for party 1; .* no control character"):
        _digits(("", f"std {char}x"))


@pytest.mark.parametrize("char", ["\t", "\u200c", "\u200d", "\u200f", "\u00ad", "\u200b"])
def test_a_tab_or_a_format_character_is_kept(char):
    """Review small N1: a tab, Persian's zero-width non-joiner, a joiner, a right-to-left mark or a soft hyphen was
    refused with the control characters (Unicode category C): none breaks the line quoting it."""
    assert _digits(("", f"std {char}x")).fitted_features == ("", f"std {char}x")


def test_a_control_character_is_refused_in_planning(plugin, tmp_path, monkeypatch):
    plugin(lambda: _digits(("", "standardised\nwith the training rows")))
    refused_in_planning(["evaluate", "--dataset", "t-fitted", *PLAN], "U+000A at position 12 for party 1", tmp_path,
                        monkeypatch)


class _CleanIterating(str):
    """A str whose iteration shows another text than it holds."""

    def __iter__(self):
        return iter("clean")


class _Short(str):
    """A str that says it is shorter than it is."""

    def __len__(self):
        return 1


@pytest.mark.parametrize("kind, text", [(_CleanIterating, "standardised\nwith the training rows"),
                                        (_Short, "x" * 201)])
def test_a_str_subclass_is_refused(kind, text):
    """Review small F2: a str subclass overriding ``__iter__`` or ``__len__`` got past the character and length checks
    (its newline was quoted in every note): only an exact str is a declaration's entry."""
    with pytest.raises(ValueError, match=f"got a {kind.__name__} for party 1; valid: .* 2 str"):
        _digits(("", kind(text)))


class _CleanTuple(tuple):
    """A tuple whose iteration shows other entries than it holds."""

    def __iter__(self):
        return iter(("", ""))


class _ShortList(list):
    """A list that says it holds as many entries as there are parties, and shows clean ones."""

    def __len__(self):
        return 2

    def __getitem__(self, index):
        return ""


@pytest.mark.parametrize("container", [_CleanTuple(("", "standardised\nwith the training rows")),
                                       _ShortList(["", "x", "y"])])
def test_a_container_not_of_an_exact_built_in_type_is_refused(container, plugin, tmp_path, monkeypatch):
    """A tuple or list subclass could show clean entries for masked ones (the entries were already exact str)."""
    with pytest.raises(ValueError, match=f"got a {type(container).__name__}; valid: .* exactly, no subclass"):
        _digits(container)
    made = _digits(("", ""))
    object.__setattr__(made, "fitted_features", container)  # a plugin changing it after construction
    plugin(lambda: made)
    refused_in_planning(["evaluate", "--dataset", "t-fitted", *PLAN], f"got a {type(container).__name__};", tmp_path,
                        monkeypatch)


@pytest.mark.parametrize("party", [False, True])
def test_a_class_named_with_a_line_break_is_named_escaped_on_one_line(party):
    """Review misc F7: a container's or an entry's class name was quoted raw ('Evil\\nerror: fake': two lines)."""
    evil = type("Evil\nerror: fake" + "x" * 100, (str if party else tuple,), {})
    with pytest.raises(ValueError) as refused:
        _digits(("", evil("x")) if party else evil(("", "")))
    assert "\n" not in str(refused.value) and "got a Evil\\nerror: fake" in str(refused.value)
    assert "x" * 60 not in str(refused.value)  # bounded


def test_a_plugin_check_names_a_class_escaped_on_one_line():
    """The same for a declaration the registry checks (``plugin_checks.shown``)."""
    from vflpriv.config.plugin_checks import shown

    assert shown(type("Evil\nerror: fake", (), {})()) == "a Evil\\nerror: fake"
