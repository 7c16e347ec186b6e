"""An auditor's empirical epsilon over seeds (``vflpriv.auditors``), apart from the attacks': per setting, its guesses
of the canaries pooled over the independent trainings (each training once: every record of a training carries the
same guesses), the 95% lower bound they certify at the claim's delta, and the claimed epsilon. Pooling is sound for the
reason the attacks' is (``vflpriv.tradeoff.epsilon``); the auditor is one guesser, so no correction over attacks
applies, and it never enters their worst case."""

from __future__ import annotations

import numpy as np
import pandas as pd

from vflpriv.common.empirical_epsilon import menu_lower
from vflpriv.tradeoff.epsilon import GROUP, pooled_counts


def auditor_table(results: pd.DataFrame) -> pd.DataFrame:
    """Per setting (method, dataset, defense, phase, strength) and auditor: the pooled bound, the guesses it rests on
    and their accuracy, the canaries, seeds and delta, and the claimed epsilon (mean over seeds). Empty without one."""
    if "auditor" not in results or results.empty:
        return pd.DataFrame()
    frame = results[(results["status"] == "ok") & (results["auditor"].fillna("") != "")]
    frame = frame.drop_duplicates("training_key")
    rows = []
    for key, setting in frame.groupby([*GROUP, "auditor"], sort=False, dropna=False):
        counts, canaries = pooled_counts(setting, column="auditor_counts")
        if not counts:
            continue
        delta = float(np.nan_to_num(setting["epsilon_delta"].max(), nan=0.0))
        bound, guesses = menu_lower(counts, canaries=canaries, classes=int(setting["num_classes"].iloc[0]), delta=delta)
        right = next(r for g, r in counts if g == guesses)
        rows.append({**dict(zip([*GROUP, "auditor"], key)), "axis": str(setting["strength_axis"].iloc[0]),
                     "epsilon_lower": bound, "delta": delta, "canary_guesses": guesses,
                     "canary_accuracy": right / guesses, "canaries": canaries, "seeds": int(setting["seed"].nunique()),
                     "epsilon_claimed": float(setting["epsilon"].mean())})
    return pd.DataFrame(rows)
