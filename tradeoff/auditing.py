"""An auditor's empirical epsilon over seeds (``vflpriv.auditors``), apart from the attacks': per setting, its guesses
of the canaries pooled over the independent trainings (each training once: every record of a training carries the
same guesses; one training per seed: a seed's trainings share their canaries), the 95% lower bound they certify at
the claim's delta (Steinke et al.'s, and the f-DP one-run bounds with k = the canaries' classes:
``vflpriv.common.fdp_one_run``), and the claimed epsilon. Pooling is sound for the reason the attacks' is
(``vflpriv.tradeoff.epsilon``); the auditor is one guesser, so no correction over attacks applies, and it never
enters their worst case."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from vflpriv.common.empirical_epsilon import menu_lower
from vflpriv.common.fdp_one_run import fdp_bounds
from vflpriv.config.registry import AUDITORS
from vflpriv.tradeoff.epsilon import GROUP, claim_test, holm_over, pooled_counts


def auditor_table(results: pd.DataFrame) -> pd.DataFrame:
    """Per setting (method, dataset, defense, phase, variant, strength) and auditor: the pooled bound, the guesses it
    rests on and their accuracy, the canaries, seeds and delta, the claimed epsilon (the weakest of the setting's
    trainings) and its check: the cap of the auditor's canaries (one guesser, its menu), testable below it, and rejected
    at the 95% level with Holm over the auditor's testable claims of the table (the auditor never enters the attacks'
    worst case; a report that prints both decides them with one Holm over the union: ``holm_over``); the check, as
    the attacks', is the test chosen by delta (``vflpriv.common.canary_bound``: Steinke et al.'s at delta 0, the f-DP
    one above, at the full level), named in ``rejecting_test``. Empty without an auditor."""
    if "auditor" not in results or results.empty:
        return pd.DataFrame()
    results = results if "variant" in results else results.assign(variant="")
    frame = results[(results["status"] == "ok") & (results["auditor"].fillna("") != "")]
    frame = _one_training_per_seed(frame.drop_duplicates("training_key"), results)
    rows = []
    for key, setting in frame.groupby([*GROUP, "auditor", "auditor_options", "_classes"], sort=False, dropna=False):
        counts, canaries = pooled_counts(setting, column="auditor_counts")
        if not counts:
            continue
        delta = _scored_delta(results[results["training_key"].isin(setting["training_key"])])
        classes = int(key[-1])  # the group's C (``_drawn_classes``)
        bound, guesses = menu_lower(counts, canaries=canaries, classes=classes, delta=delta)
        right = next(r for g, r in counts if g == guesses)
        claimed = float(setting["epsilon"].max())  # each training must hold its own claim: test the weakest
        row = {**dict(zip([*GROUP, "auditor", "auditor_options"], key[:-1])),
               "axis": str(setting["strength_axis"].iloc[0]),
               "epsilon_lower": bound, "delta": delta, "canary_guesses": guesses, "canary_accuracy": right / guesses,
               "canaries": canaries, "seeds": int(setting["seed"].nunique()), "epsilon_claimed": claimed,
               "testable": False, "rejected": False, "classes": classes}
        fdp = fdp_bounds(counts, canaries=canaries, classes=classes, delta=delta)  # vflpriv.common.fdp_one_run
        row |= {"epsilon_fdp": fdp.epsilon, "mu_lower": fdp.mu, "epsilon_gdp_estimate": fdp.epsilon_gdp_estimate}
        if np.isfinite(claimed):
            test = claim_test({str(key[-3]): (counts, canaries)}, planned=1, classes=classes, claim=claimed,
                              delta=delta)
            row |= {"cap": test.cap, "testable": test.testable, "p_value": test.p_value,
                    "rejecting_guesses": test.guesses, "rejecting_right": test.right, "rejecting_test": test.test}
        rows.append(row)
    return holm_over(pd.DataFrame(rows))[0]


def _scored_delta(rows: pd.DataFrame) -> float:
    """The delta the trainings' canaries were scored at: the attacks' (``epsilon_lower_delta``, kept where a read
    withholds the claim and its delta), else the claim's; 0 where neither (review-hostile H6: it moved to 'pure')."""
    scored = rows.get("epsilon_lower_delta", pd.Series(np.nan, index=rows.index))  # frames of records without it
    return float(np.nan_to_num(np.fmax(scored, rows["epsilon_delta"]).max(), nan=0.0))


def _one_training_per_seed(frame: pd.DataFrame, results: pd.DataFrame) -> pd.DataFrame:
    """One training per (setting, auditor, seed): two trainings of a seed (an acting attack's own federation, another
    adversary's) plant the same canaries with the same labels, so their guesses are not independent and are never
    pooled twice. The training that most records share (the passive attacks') is kept; ties by its key."""
    shared = results["training_key"].value_counts()
    frame = frame.assign(auditor_options=[_options(c, a) for c, a in zip(frame["config"], frame["auditor"])]
                         if "config" in frame else "",  # another game or menu, and another C, is another row
                         _classes=_drawn_classes(frame))
    order = frame.assign(_records=-frame["training_key"].map(shared).fillna(0)).sort_values(["_records",
                                                                                           "training_key"])
    return order.drop_duplicates([*GROUP, "auditor", "auditor_options", "_classes", "seed"]).drop(
        columns="_records").sort_index()


def _drawn_classes(frame: pd.DataFrame) -> pd.Series:
    """Each record's C: its ``canary_classes`` (records before the field, or with 0 there, drew from every class:
    ``num_classes``), as :func:`vflpriv.tradeoff.epsilon.canary_classes` reads it for a group."""
    drawn = pd.to_numeric(frame["canary_classes"], errors="coerce").fillna(0) if "canary_classes" in frame else 0
    return pd.Series(drawn, index=frame.index).where(lambda c: c > 0, frame["num_classes"]).astype(int)


def _options(config_text: object, auditor: str) -> str:
    """The options ``auditor`` ran with where they are not its defaults, and its canaries' label game where it is not
    the default (``canary_inputs: crafted; canary_labels: pair``); '' for defaults or records without a config.
    Trainings with other options play another game (or score another menu), so they are never pooled together."""
    try:
        config = json.loads(str(config_text)) if isinstance(config_text, str) and config_text else {}
    except ValueError:
        return ""
    options = dict((config.get("finetune") or {}).get("auditor_options") or {})
    if auditor in AUDITORS.names():  # spelled-out defaults are the defaults' game; an auditor not installed here (or
        try:                          # named by a path, never imported from a record) keeps its options as written
            options = AUDITORS.get(auditor).Options.model_validate(options).model_dump(exclude_defaults=True)
        except ValueError:
            pass
    labels = (config.get("partition") or {}).get("canary_labels", "uniform")
    if labels != "uniform":
        options["canary_labels"] = labels
    return "; ".join(f"{k}: {v}" for k, v in sorted(options.items()))
