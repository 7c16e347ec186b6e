"""What audit.md/json say of a setting whose epsilon a read withholds (review-hostile H4, H6): the reason, and the
auditor's bound at the delta its canaries were scored at, as the attacks' bound (not 'pure')."""

from __future__ import annotations

import json

import pandas as pd

from vflpriv.store.records import RunRecord, without_epsilon
from vflpriv.tradeoff.auditing import auditor_table
from vflpriv.tradeoff.epsilon import _claim_note

WHY = "epsilon withheld: method plug-method is not vflpriv's own or not known here"


def _record(seed: int = 0, **fields) -> RunRecord:
    return RunRecord(key=f"k{seed}", attack="mc", method="plug-method", dataset="digits", defense="dp-gaussian",
                     phase="finetune", strength=1.0, seed=seed, **fields)


def _records(withheld: bool) -> pd.DataFrame:
    """Two seeds of one dp-gaussian setting audited by an auditor whose 20 guesses are all right, scored at 1e-05."""
    rows = []
    for seed in (0, 1):
        record = _record(seed, status="ok", training_key=f"t{seed}", num_classes=10,
                           canaries=20, auditor="gradient-lrt", auditor_counts=json.dumps([[20, 20]]),
                           epsilon=2.0, epsilon_delta=1e-05, epsilon_lower_delta=1e-05)
        rows.append((without_epsilon(record, WHY) if withheld else record).to_dict())
    return pd.DataFrame(rows, columns=RunRecord.columns())


def test_a_withheld_epsilon_is_named_as_withheld():
    """audit.md read 'no claimed epsilon', as for a defense that claims none; the note now says why."""
    assert _claim_note(_records(withheld=True)) == WHY


def test_the_auditor_s_bound_keeps_its_delta_where_the_claim_is_withheld():
    """The auditor's delta was the claim's column, which withholding blanks: its bound moved to delta 0 ('pure')."""
    shown, withheld = auditor_table(_records(withheld=False)), auditor_table(_records(withheld=True))
    assert withheld["delta"].tolist() == shown["delta"].tolist() == [1e-05]
    assert withheld["epsilon_lower"].tolist() == shown["epsilon_lower"].tolist()
    assert withheld["epsilon_claimed"].isna().all() and not shown["epsilon_claimed"].isna().any()


class _Named(type):
    """A plugin defense's metaclass whose ``__name__`` is its code, which raises."""

    @property
    def __name__(cls):
        raise RuntimeError("the plugin's __name__ ran")


def test_an_unjudged_claim_names_a_plugin_defense_without_running_its_code(monkeypatch):
    """accountants.unjudged read ``cls.__name__``: a raising one failed the read (review-hostile H9)."""
    from vflpriv.config.registry import DEFENSES, METHODS
    from vflpriv.defenses.dp_gaussian import GaussianDP
    from vflpriv.methods.splitnn import SplitNN
    from vflpriv.runner.accountants import unjudged
    from vflpriv.store.records import CLAIM_VERSION

    DEFENSES.register("plug-dp", type("_M", (_Named, type(GaussianDP)), {})("PlugDP", (GaussianDP,), {}))
    METHODS.register("plug-m", type("PlugM", (SplitNN,), {}))
    record = _record(claim_version=CLAIM_VERSION, epsilon=1.0, epsilon_delta=1e-05)
    config = type("C", (), {"defenses": [type("D", (), {"name": "plug-dp"})], "method": type("M", (), {
        "name": "plug-m", "options": {}})})
    assert unjudged(record, config).endswith("void the claim of PlugDP")


def test_a_read_that_fails_to_judge_withholds_the_epsilon(monkeypatch, tiny):
    """reports.results._reading caught a raising judgement as 'settings unread' and showed the epsilon: fail closed."""
    from vflpriv.reports.results import as_read
    from vflpriv.tradeoff import spelling

    def raising(record, run):
        raise RuntimeError("a plugin's code raised")

    monkeypatch.setattr(spelling, "withheld", raising)
    monkeypatch.setattr(spelling, "disagreement", lambda record, run: "")  # the record's fields as its settings
    record = _record(config=tiny().recorded(), epsilon=1.0, epsilon_delta=1e-05)
    (shown,) = as_read(pd.DataFrame([record.to_dict()], columns=RunRecord.columns())).to_dict("records")
    assert pd.isna(shown["epsilon"]) and "epsilon withheld: judging whether its claims are counted failed" in \
        shown["notes"]


def test_an_auditor_s_guesses_of_a_plugin_class_are_named_without_running_its_code():
    """runner.auditing named an auditor's non-tensor guesses by ``type(t).__name__``: a raising one failed the run."""
    import torch

    from vflpriv.runner.auditing import _guesses_problem

    guesses = _Named("Guesses", (), {})()
    assert "got guesses Guesses, confidences (3,)" in _guesses_problem(guesses, torch.zeros(3), 3)
