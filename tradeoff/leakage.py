"""Does an attack leak beyond the adversary's prior, and at what defense strength does it stop?

Leakage of one seed is attack accuracy minus prior accuracy on the same targets (same seed: same
partition, same auxiliary set). Two tests of it:

- per sample (the default where the records hold each target's outcome): the attack and the prior guess the
  same targets, so each target is a pair (attack right?, prior right?) and each seed's leakage L_s is the mean of
  the paired differences d in {-1, 0, 1}, with variance v_s = var(d) / n_s (McNemar's, 1947, for paired
  proportions). The seeds are combined by a random-effects meta-analysis (DerSimonian & Laird 1986): the
  between-seed variance tau^2 (a different training per seed) is estimated from Cochran's Q and added to each
  v_s; the pooled leakage gets a normal 95% interval and a one-sided z p-value. Where the seeds agree (tau^2 = 0)
  the hundreds of targets give the power a t-test over 3 seeds lacks; where they disagree the interval widens
  with them, so noise between trainings is not read as leakage. With one seed, tau^2 cannot be estimated: the
  interval is that training's alone (said in the test's name).
- per seed (records without per-target outcomes): the paired differences over seeds give a t-based 95% interval
  and a one-sided paired t-test of "leakage > 0" (Student 1908). With one seed there is no test.

A feature attack's leakage is the prior's reconstruction error minus the attack's (MSE on features scaled to [0, 1]),
per target: the same per-sample test on those continuous paired differences (their variance in place of McNemar's;
:func:`error_paired_leakage`), with a margin relative to the prior's error (``FEATURE_MARGIN`` of its mean MSE: an
MSE has no scale of its own, as an accuracy has). A feature attack has no "attack failed" verdict: a reconstruction
significantly worse than the prior is what a decoder fitted on rows that carry nothing of the victim's features
does (it fits their noise; a constant or noise bottom reads so), not a training that collapsed, so it reads "no"
(the leakage is shown to be below the margin) and the audit says it fell below the prior.

Verdicts, with a tolerance ``margin`` (default 0.02 accuracy):

- ``yes``: the interval's lower bound is above 0 (the attack beats the prior, p < 0.025 one-sided);
- ``no``: the interval's upper bound is below ``margin`` (any leakage is shown to be smaller than it);
- ``attack failed``: the upper bound is below ``-margin``: the attack did worse than the prior, which
  knows nothing of the federation, so it failed to train (e.g. a self-training collapse) and says nothing
  about leakage; reported apart rather than as a reassuring ``no``;
- ``inconclusive``: neither (too few seeds, or leakage near the margin).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from vflpriv.common.errors import DamagedRecordError, RepeatedSeedError
from vflpriv.common.lazy import Lazy
from vflpriv.store.feature_fields import errors_of, errors_problem

stats = Lazy("scipy.stats")  # imported at the first test

MARGIN = 0.02
#: A feature attack's verdict margin, as a share of the prior's mean MSE on the targets.
FEATURE_MARGIN = 0.05
TEST_NAME = "paired t-test over seeds (attack vs prior accuracy on each seed), 95% interval"
SAMPLE_TEST_NAME = ("per-target paired differences of attack and prior (McNemar variance) combined over seeds by a "
                    "DerSimonian-Laird random-effects model, 95% normal interval, one-sided z p")
ERROR_TEST_NAME = ("per-target paired differences of prior and attack MSE combined over seeds by a DerSimonian-Laird "
                   "random-effects model, 95% normal interval, one-sided z p")


def verdict_rule(margin: float) -> str:
    """The rule the verdicts follow, stated for a reader of the report (p is one-sided, for "leakage > 0")."""
    return (f"yes when the 95% interval of the leakage lies above 0; no when it lies below the margin +{margin:g}; "
            f"below -{margin:g}: without a defense the attack failed (it did not reach the prior, so it says nothing "
            "about leakage), with one the defense pushed the attack below the prior; inconclusive otherwise. p is "
            "one-sided, for leakage > 0 "
            "(McNemar's on the targets, or the paired t-test over seeds where the records hold no per-target "
            "outcomes), and is reported beside the interval, which alone decides")


@dataclass(frozen=True)
class LeakageTest:
    n_seeds: int
    attack_mean: float
    prior_mean: float
    leakage: float
    ci_low: float
    ci_high: float
    p_value: float
    verdict: str
    test: str = TEST_NAME
    n_targets: int = 0

    def to_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()}


def paired_leakage(attack: np.ndarray, prior: np.ndarray, *, margin: float = MARGIN) -> LeakageTest:
    """The paired test of ``attack - prior`` over seeds (arrays aligned by seed)."""
    attack, prior = np.asarray(attack, float), np.asarray(prior, float)
    d = attack - prior
    n = d.size
    mean = float(d.mean()) if n else math.nan
    if n < 2:
        return LeakageTest(n, float(attack.mean()) if n else math.nan, float(prior.mean()) if n else math.nan,
                           mean, math.nan, math.nan, math.nan, "inconclusive")
    se = float(d.std(ddof=1)) / math.sqrt(n)
    if se == 0.0:  # every seed leaks the same: the interval is that value
        low = high = mean
        p = 0.0 if mean > 0 else 1.0
    else:
        crit = float(stats.t.ppf(0.975, n - 1))
        low, high = mean - crit * se, mean + crit * se
        p = float(stats.t.sf(mean / se, n - 1))
    return LeakageTest(n, float(attack.mean()), float(prior.mean()), mean, low, high, p, _verdict(low, high, margin))


def _verdict(low: float, high: float, margin: float, *, can_fail: bool = True) -> str:
    if low > 0:
        return "yes"
    if can_fail and high < -margin:
        return "attack failed"
    return "no" if high < margin else "inconclusive"


def _bits(text: str) -> np.ndarray:
    return np.frombuffer(text.encode(), dtype=np.uint8).astype(np.int8) - ord("0")


def sample_paired_leakage(attack_hits: list[str], prior_hits: list[str], *, margin: float = MARGIN) -> LeakageTest:
    """The per-sample test (see the module) from each seed's per-target outcomes ('1' right, '0' wrong), attack and
    prior aligned target by target."""
    pairs = [(_bits(a), _bits(p)) for a, p in zip(attack_hits, prior_hits, strict=True)]
    if not pairs or any(a.size != p.size or a.size == 0 for a, p in pairs):
        raise ValueError("each seed needs attack and prior outcomes of the same, non-empty target set")
    return _random_effects([(a - p).astype(float) for a, p in pairs], [a.mean() for a, _ in pairs],
                           [p.mean() for _, p in pairs], margin=margin, test=SAMPLE_TEST_NAME)


def error_paired_leakage(attack_errors: list[np.ndarray], prior_errors: list[np.ndarray], *,
                         margin: float = FEATURE_MARGIN) -> LeakageTest:
    """The per-sample test of a feature attack from each seed's per-target errors (MSE), attack and prior aligned
    target by target: leakage = prior error - attack error; the verdict margin is ``margin`` times the prior's mean
    error (``attack_mean`` and ``prior_mean`` are mean errors)."""
    pairs = [(np.asarray(a, float), np.asarray(p, float)) for a, p in zip(attack_errors, prior_errors, strict=True)]
    if not pairs or any(a.size != p.size or a.size == 0 for a, p in pairs):
        raise ValueError("each seed needs attack and prior errors of the same, non-empty target set")
    prior_mean = float(np.mean([p.mean() for _, p in pairs]))
    return _random_effects([p - a for a, p in pairs], [a.mean() for a, _ in pairs], [p.mean() for _, p in pairs],
                           margin=margin * prior_mean, test=ERROR_TEST_NAME, can_fail=False)


def _random_effects(diffs: list[np.ndarray], attack: list[float], prior: list[float], *, margin: float,
                    test: str, can_fail: bool = True) -> LeakageTest:
    """Each seed's paired differences ``diffs`` combined by the random-effects model of the module's docstring."""
    means = np.array([d.mean() for d in diffs])
    within = np.array([d.var(ddof=1) / d.size if d.size > 1 else 0.0 for d in diffs])
    if not within.any():  # every pair agrees within each seed: no sampling noise to speak of
        pooled = float(means.mean())
        se = math.sqrt((float(means.var(ddof=1)) if means.size > 1 else 0.0) / means.size)
    else:
        within = np.maximum(within, 1e-12)  # a noise-free seed weighs most, not infinitely (no NaN from 1 / 0)
        w = 1.0 / within
        fixed = float((w * means).sum() / w.sum())
        q = float((w * (means - fixed) ** 2).sum())
        tau2 = max(0.0, (q - (means.size - 1)) / (w.sum() - (w**2).sum() / w.sum())) if means.size > 1 else 0.0
        w = 1.0 / (within + tau2)
        pooled = float((w * means).sum() / w.sum())
        se = math.sqrt(1.0 / w.sum())
    low, high = pooled - 1.96 * se, pooled + 1.96 * se
    p_value = float(stats.norm.sf(pooled / se)) if se > 0 else (0.0 if pooled > 0 else 1.0)
    return LeakageTest(len(diffs), float(np.mean(attack)), float(np.mean(prior)), pooled, low, high, p_value,
                       _verdict(low, high, margin, can_fail=can_fail), test, sum(d.size for d in diffs))


def measured(records: pd.DataFrame) -> pd.DataFrame:
    """The records that measure leakage: successful, with a prior to compare the attack with (a feature attack's: its
    prior's error); a run without one, such as the audit's canary-free control trainings, measures utility only."""
    prior = records["prior_accuracy"].notna()
    if "prior_mse" in records:
        prior |= records["prior_mse"].notna()
    return records[(records["status"] == "ok") & prior]


#: The columns of a record :func:`leakage_test` reads.
TEST_COLUMNS = ["status", "seed", "secret", "attack_accuracy", "prior_accuracy", "prior_mse", "attack_errors",
                "prior_errors", "attack_hits", "prior_hits", "key", "n_targets", "feature_mse"]


def leakage_test(records: pd.DataFrame, *, margin: float = MARGIN, feature_margin: float = FEATURE_MARGIN
                 ) -> LeakageTest:
    """The test over the records of one setting (attack, phase, defense, strength and every other setting), one per
    seed: per sample where every record holds its per-target outcomes (a feature attack's: its per-target errors), else
    per seed. Records without a prior are left out (:func:`measured`); a seed that appears twice is refused: it would
    count one training's outcome twice and narrow the interval (:func:`refuse_repeated_seeds`)."""
    ok = measured(records).sort_values("seed")
    refuse_repeated_seeds(ok)
    if len(ok) and is_features(ok):
        return error_paired_leakage(*per_target(ok), margin=feature_margin)
    if len(ok) and {"attack_hits", "prior_hits"} <= set(ok) and all(
            isinstance(a, str) and isinstance(p, str) and a and len(a) == len(p)
            for a, p in zip(ok["attack_hits"], ok["prior_hits"])):
        return sample_paired_leakage(list(ok["attack_hits"]), list(ok["prior_hits"]), margin=margin)
    return paired_leakage(ok["attack_accuracy"].to_numpy(), ok["prior_accuracy"].to_numpy(), margin=margin)


def refuse_repeated_seeds(records: pd.DataFrame) -> None:
    """A :class:`RepeatedSeedError` naming the records (their keys, where they have them) of each seed that appears
    more than once among ``records`` and what to do."""
    repeated = sorted(set(records.loc[records["seed"].duplicated(), "seed"]))
    if not repeated:
        return
    named = "; ".join(f"seed {seed}: runs {', '.join(map(str, records.loc[records['seed'] == seed, 'key']))}"
                      for seed in repeated) if "key" in records else ""
    raise RepeatedSeedError(
        f"seed(s) {', '.join(map(str, repeated))} appear more than once among the records of one leakage test"
        f"{f' ({named})' if named else ''}, whose settings as the tables read them do not tell them apart, and each "
        "seed counts once: keep one record of each seed in the store (delete the others, e.g. sqlite3 results.sqlite "
        "\"DELETE FROM runs WHERE key = '<key>'\"), or write the runs that differ into separate stores")


def per_target(records: pd.DataFrame) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The records' per-target attack and prior errors, parsed once, each checked as no store read checks them (it
    checks only their length: ``vflpriv.store.feature_fields``): finite numbers, one per target, whose mean is the
    record's MSE; else :class:`DamagedRecordError` naming the run (a hand edit, which ``--overwrite`` recomputes)."""
    found: dict[str, list[np.ndarray]] = {"attack_errors": [], "prior_errors": []}
    for row in records.to_dict("records"):
        for name, mse in (("attack_errors", "feature_mse"), ("prior_errors", "prior_mse")):
            values = errors_of(row[name])
            problem = errors_problem(values, name, n_targets=row.get("n_targets"), mse=mse, mean=row.get(mse))
            if problem:
                raise DamagedRecordError(f"the stored record of run {row.get('key', '?')} is damaged: {problem}; "
                                         "rerun its command with --overwrite to recompute it")
            found[name].append(values)
    return found["attack_errors"], found["prior_errors"]


def falls_to_prior(records: pd.DataFrame, *, margin: float = MARGIN, feature_margin: float = FEATURE_MARGIN
                   ) -> dict | None:
    """The weakest strength of one defense sweep at which the attack falls to the prior: its own test
    (:func:`strength_verdicts`) shows the leakage below the margin ("no", or "attack failed": below -margin) and no
    stronger measured strength reads "yes" (review fe F2: a mean within the margin is no test). {strength, axis,
    leakage, utility} (the mean leakage and utility there), or None if no measured strength gets there."""
    verdicts = strength_verdicts(records, margin=margin, feature_margin=feature_margin)
    fallen = [i for i, (_, v) in enumerate(verdicts) if v in FALLEN
              and all(w != "yes" for _, w in verdicts[i + 1:])]
    if not fallen:
        return None
    ok = measured(records)
    at = ok[ok["strength"] == verdicts[fallen[0]][0]]
    leak = at["prior_mse"] - at["feature_mse"] if is_features(ok) else at["attack_accuracy"] - at["prior_accuracy"]
    return {"strength": float(verdicts[fallen[0]][0]), "axis": str(ok["strength_axis"].iloc[0]),
            "leakage": float(leak.mean()), "utility": float(at["utility"].mean())}


#: The verdicts that show a strength's leakage below the margin (an attack pushed below the prior is within it too).
FALLEN = ("no", "attack failed")


def strength_verdicts(records: pd.DataFrame, *, margin: float = MARGIN, feature_margin: float = FEATURE_MARGIN
                      ) -> list[tuple[float, str]]:
    """Per measured strength of one defense sweep, weak to strong on its axis, the verdict of its own
    :func:`leakage_test`; "inconclusive" where a seed appears twice at it (no test counts one training twice) or a
    feature attack's records hold no per-target errors (no test)."""
    ok = measured(records)
    if ok.empty:
        return []
    lower = bool((ok["strength_stronger"] == "lower").any())
    untested = is_features(ok) and ("attack_errors" not in ok or ok["attack_errors"].isna().any())
    found = []
    for strength in sorted(ok["strength"].unique(), reverse=lower):
        at = ok[ok["strength"] == strength]
        found.append((float(strength), "inconclusive" if untested or at["seed"].duplicated().any() else
                      leakage_test(at, margin=margin, feature_margin=feature_margin).verdict))
    return found


def is_features(records: pd.DataFrame) -> bool:
    """Whether the records are a feature attack's (older stores hold label attacks' only, without the column)."""
    return "secret" in records and bool((records["secret"] == "features").any())
