"""A setting left unset (None in a run's configuration) reads "unset" in variant labels (tables, audit.md, the
report's verdicts) and in the report's settings, as the rest of the tool says, never Python's "None"."""

from __future__ import annotations

import json

import pandas as pd

from vflpriv.reports.html import _settings, render_report
from vflpriv.tradeoff.variants import with_variants


def _runs(*aux_features) -> pd.DataFrame:
    rows = [dict(method="splitnn", dataset="digits", attack="fi-decoder", defense="none", phase="finetune",
                 secret="features", adversary="0", victim="1", strength=0.0, seed=0, status="ok",
                 config=json.dumps({"seed": 0, "attack": {"name": "fi-decoder"}, "defenses": [],
                                    "partition": {"aux_features": k}})) for k in aux_features]
    return pd.DataFrame(rows)


def test_an_unset_setting_names_its_variant_unset():
    variants = with_variants(_runs(None, 40))["variant"].tolist()
    assert variants == ["partition.aux_features=unset", "partition.aux_features=40"]


def test_the_report_s_settings_say_unset_for_none_shared_or_varying():
    _, varying = _settings(_runs(None, 40))
    assert set(varying["partition.aux_features"]) == {"40", "unset (the default)"}
    shared, _ = _settings(_runs(None, None))
    assert dict(shared)["partition.aux_features"] == "unset"


def test_the_report_counts_one_training_in_the_singular():
    """Two feature runs on one training (aux_features is not part of it) read "2 runs on 1 trainings"."""
    runs = _runs(None, 40).assign(training_key="t0", utility=0.9)
    page = render_report(runs, title="t", context={}, sections=[])
    assert "2 runs on 1 training: 2 ok;" in page
