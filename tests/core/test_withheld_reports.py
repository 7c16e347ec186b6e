"""What audit.md/json say of a setting whose epsilon a read withholds (review-hostile H4, H6): the reason, and the
auditor's bound at the delta its canaries were scored at, as the attacks' bound (not 'pure')."""

from __future__ import annotations

import json

import pandas as pd

from vflpriv.store.records import RunRecord, without_epsilon
from vflpriv.tradeoff.auditing import auditor_table
from vflpriv.tradeoff.epsilon import _claim_note

WHY = "epsilon withheld: method plug-method is not vflpriv's own or not known here"


def _records(withheld: bool) -> pd.DataFrame:
    """Two seeds of one dp-gaussian setting audited by an auditor whose 20 guesses are all right, scored at 1e-05."""
    rows = []
    for seed in (0, 1):
        record = RunRecord(key=f"k{seed}", attack="mc", method="plug-method", dataset="digits", defense="dp-gaussian", phase="finetune",
                           strength=1.0, seed=seed, status="ok", training_key=f"t{seed}", num_classes=10,
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
