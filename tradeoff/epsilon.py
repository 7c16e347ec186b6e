"""Empirical epsilon over seeds: each attack's canary guesses pooled over the independent trainings of a setting, the
worst case over the attacks, and the check of the epsilon a DP defense claims against them.

Pooling is sound for both tests. Steinke et al.'s: each training's right guesses are dominated by a binomial
(``vflpriv.common.empirical_epsilon``) and the trainings are independent, so their sum is dominated by the binomial of
the summed guesses. The f-DP one (``vflpriv.common.fdp_one_run``): its per-canary constraint needs only that a canary's
guess is a post-processing of an output of a mechanism that is f-DP in that canary's secret, given every other
canary's; pooled over seeds, each canary's guess is a post-processing of its own training, which is f-DP in it, and the
other trainings, independent of it, are post-processing randomness, so the pooled canaries are one game of m canaries
summed over the seeds (one training per seed and guesser: several adversaries of a seed are guessers of their own,
:func:`_guessers`). A setting is a
(method, dataset, defense, phase, variant, strength): a defense's option variants (label-dp uniform and two-stage)
are settings of their own. The worst case over the A attacks planned in a setting (every attack with a record there,
whether or not it guessed a canary) is the largest of their bounds, each at level 5% / A (Bonferroni), so it is
still a 95% bound. Each attack's bound there is the one test chosen by delta before any data on its pooled counts
(:mod:`vflpriv.common.canary_bound`: Steinke et al.'s at delta 0, where the f-DP test never rejects more; the f-DP one
at delta > 0), at the attack's full share. An attack's own row carries both bounds, each at 5% alone: only the
chosen one is the test (at delta > 0 their larger is not a 95% bound).

The check of a claim (epsilon, delta), the largest over the setting's trainings (each must hold it):

- its cap: the largest worst-case bound the canaries could give if every one were guessed right, with each attack's
  menu and the 5% / A share, by the chosen test (:func:`vflpriv.common.canary_bound.cap`); a claim at or above it is
  untestable with those canaries, whatever the attacks do;
- its p-value: the worst case's, min over the attacks of A x their menu p-value (Bonferroni over attacks and menu;
  the chosen test's: :func:`vflpriv.common.canary_bound.menu_p_value`);
- a decision from those p-values with Holm's step-down correction over every testable claim the table checks (one
  ``vflpriv table``), so the chance of rejecting any true claim of the table is at most 5%: "claim rejected at the
  95% level" with the counts that reject it. No single attack's row rejects a claim. A report that prints the
  auditor's claims beside them (the audit's, ``vflpriv.reports.canaries``) decides both with one Holm over their
  union (:func:`holm_over`), so its 5% covers every claim it prints.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from vflpriv.common import bound_args, canary_bound, fdp_one_run
from vflpriv.common.empirical_epsilon import ALPHA, menu_lower

GROUP = ["method", "dataset", "defense", "phase", "variant", "strength"]
#: The attack name of a setting's worst-case row.
WORST = "worst-case"


def pooled_counts(rows: pd.DataFrame, *, column: str = "canary_counts") -> tuple[list[list[int]], int]:
    """(per menu entry [guesses, right] summed over the runs, canaries summed): the runs of one setting and attack (or
    of an auditor: ``column="auditor_counts"``)."""
    totals: list[list[int]] = []
    canaries = 0
    for text, count in zip(rows[column], rows["canaries"]):
        counts = json.loads(text) if isinstance(text, str) and text else []
        if not counts:
            continue
        canaries += int(count)
        for i, (guesses, right) in enumerate(counts):
            if i < len(totals):
                totals[i][0] += guesses
                totals[i][1] += right
            else:
                totals.append([guesses, right])
    return totals, canaries


def _delta(rows: pd.DataFrame) -> float:
    return float(np.nan_to_num(rows["epsilon_lower_delta"].max(), nan=0.0))


def pooled_lower(rows: pd.DataFrame, *, alpha: float = ALPHA) -> tuple[float, int, float, float]:
    """(Steinke et al.'s epsilon lower bound, guesses of the menu entry selected for it, accuracy of those guesses, the
    f-DP one-run bound of the same menu) of one attack's runs pooled, each at ``alpha``; NaN where none guessed. The
    accuracy is the selected entry's (chosen for the best bound, so optimistic)."""
    counts, canaries = pooled_counts(rows)
    if not counts:
        return float("nan"), 0, float("nan"), float("nan")
    classes, delta = canary_classes(rows), _delta(rows)
    bound, guesses = menu_lower(counts, canaries=canaries, classes=classes, delta=delta, alpha=alpha)
    right = next(r for g, r in counts if g == guesses)  # every menu entry keeps at least one guess
    fdp = fdp_one_run.menu_epsilon(counts, canaries=canaries, delta=delta, classes=classes, alpha=alpha)[0]
    return bound, guesses, right / guesses, fdp


@dataclass(frozen=True)
class ClaimTest:
    """The worst case's test of one claim: its p-value (the test chosen by delta, Bonferroni over the attacks and their
    menus), the attack, test and pooled counts behind it, and the cap the canaries allow (the claim is untestable at or
    above it)."""

    claim: float
    p_value: float
    attack: str
    guesses: int
    right: int
    canaries: int
    cap: float
    test: str = canary_bound.STEINKE

    @property
    def testable(self) -> bool:
        return canary_bound.testable(self.claim, self.cap)


def canary_classes(rows: pd.DataFrame) -> int:
    """The canary audit's C of these records: how many classes a canary's label was drawn from (``canary_classes``;
    records written before it, or with 0 there, drew from every class: ``num_classes``)."""
    if "canary_classes" in rows:
        drawn = pd.to_numeric(rows["canary_classes"], errors="coerce").fillna(0)
        if (drawn > 0).any():
            return int(drawn[drawn > 0].iloc[0])
    return int(rows["num_classes"].iloc[0])


def cap_of(attacks: dict[str, tuple[list[list[int]], int]], *, planned: int, classes: int, delta: float) -> float:
    """The worst case's cap: the largest bound any attack's pooled canaries could give with every guess right, at its
    menu's and the ``planned`` attacks' Bonferroni share; NaN where no attack guessed."""
    return max((canary_bound.cap(canaries=m, classes=classes, menu=len(c), attacks=planned, delta=delta)
                for c, m in attacks.values() if c), default=float("nan"))


def claim_test(attacks: dict[str, tuple[list[list[int]], int]], *, planned: int, classes: int, claim: float,
               delta: float) -> ClaimTest:
    """Test "every training is (claim, delta)-label-DP" on each attack's pooled (counts, canaries), ``planned`` attacks
    in all (one that guessed nothing still takes its Bonferroni share; ValueError where fewer are planned than given,
    or the claim is no finite number >= 0)."""
    bound_args.epsilon(claim, name="claim")
    bound_args.count("planned", planned, least=max(1, len(attacks)))
    ceiling = cap_of(attacks, planned=planned, classes=classes, delta=delta)
    best = ClaimTest(claim, 1.0, "", 0, 0, 0, ceiling)
    for name, (counts, canaries) in attacks.items():
        if not counts:
            continue
        p, (guesses, right), test = canary_bound.menu_p_value(counts, canaries=canaries, classes=classes,
                                                              epsilon=claim, delta=delta)
        p = min(1.0, p * planned)
        if p < best.p_value or not best.attack:
            best = ClaimTest(claim, p, name, guesses, right, canaries, ceiling, test)
    return best


def holm(p_values: list[float], *, alpha: float = ALPHA) -> list[bool]:
    """Holm's step-down rejections of the hypotheses with ``p_values``: the family-wise error rate is at most alpha
    (ValueError for a p-value outside [0, 1], a NaN one included: it would sort anywhere and reject)."""
    bad = [p for p in p_values if not 0 <= p <= 1]
    if bad:
        raise ValueError(f"p_values must be numbers in [0, 1], got {bad[0]!r}")
    bound_args.alpha(alpha)
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    rejected = [False] * len(p_values)
    for rank, i in enumerate(order):
        if p_values[i] > alpha / (len(p_values) - rank):
            break
        rejected[i] = True
    return rejected


def epsilon_table(results: pd.DataFrame) -> pd.DataFrame:
    """Per setting: each attack's pooled empirical epsilon (at 5%, alone), and a worst-case row over the planned
    attacks (at 5% / A) with its cap and, where a DP defense claims an epsilon, the claim's test (Holm over every
    testable claim of the table). Empty where no run had canaries."""
    results = results if "variant" in results else results.assign(variant="")
    if "secret" in results:  # a feature attack guesses no label: not among the canaries' guessers
        results = results[results["secret"].fillna("labels") != "features"]
    results = results.assign(attack=_guessers(results))
    planned_frame = results[(results["canaries"] > 0) & (results["status"] != "n/a")]
    planned_by = {_key(k): int(n) for k, n in
                  planned_frame.groupby(GROUP, sort=False, dropna=False)["attack"].nunique().items()}
    frame = planned_frame[planned_frame["status"] == "ok"]
    rows = []
    for key, setting in frame.groupby(GROUP, sort=False, dropna=False):
        attacks = {a: pooled_counts(r) for a, r in setting.groupby("attack", sort=False)}
        if not any(counts for counts, _ in attacks.values()):
            continue
        planned = planned_by[_key(key)]
        classes, delta = canary_classes(setting), _delta(setting)
        claimed = float(setting["epsilon"].max())  # each training must hold its own claim: test the weakest
        claimed_delta = float(np.nan_to_num(setting.get("epsilon_delta", pd.Series([0.0])).max(), nan=0.0)) \
            if np.isfinite(claimed) else np.nan
        base = {**dict(zip(GROUP, key)), "axis": str(setting["strength_axis"].iloc[0]),
                "stronger": str(setting["strength_stronger"].iloc[0]), "classes": classes, "epsilon_claimed": claimed,
                "epsilon_claimed_delta": claimed_delta, "epsilon_lower_delta": delta,
                "claim_note": _claim_note(setting), "testable": False, "rejected": False}
        worst = (-1.0, "", "")
        for attack, runs in setting.groupby("attack", sort=False):
            bound, guesses, accuracy, fdp = pooled_lower(runs)
            counts, canaries = attacks[attack]
            rows.append({**base, "attack": attack, "epsilon_lower": bound, "epsilon_fdp": fdp,
                         "canary_guesses": guesses, "canary_accuracy_selected": accuracy,
                         "canary_accuracy_all": counts[0][1] / counts[0][0] if counts else float("nan"),
                         "canaries": canaries, "seeds": int(runs["seed"].nunique())})
            if counts:  # the test chosen by delta at the attack's share; a tie goes to the last name
                chosen = canary_bound.menu_lower(counts, canaries=canaries, classes=classes, delta=delta,
                                                 alpha=ALPHA / planned)
                worst = max(worst, (chosen.epsilon, attack, chosen.test))
        row = {**base, "attack": WORST, "epsilon_lower": worst[0], "strongest": worst[1], "bound_test": worst[2],
               "planned_attacks": planned,
               "canaries": max(m for _, m in attacks.values()), "seeds": int(setting["seed"].nunique()),
               "cap": cap_of(attacks, planned=planned, classes=classes, delta=delta)}
        if np.isfinite(claimed):
            test = claim_test(attacks, planned=planned, classes=classes, claim=claimed, delta=claimed_delta)
            row |= {"testable": test.testable, "cap_at_claim": test.cap, "p_value": test.p_value,
                    "rejecting_attack": test.attack, "rejecting_guesses": test.guesses,
                    "rejecting_right": test.right, "rejecting_test": test.test}
        rows.append(row)
    return holm_over(pd.DataFrame(rows))[0]


def holm_over(*tables: pd.DataFrame) -> list[pd.DataFrame]:
    """The tables with ``rejected`` decided by Holm's step-down over the union of their testable claims (the rows with
    ``testable`` true, by their ``p_value``) and ``holm_family`` their number: one family, so the chance that any true
    claim of the tables is rejected is at most 5%. A report that prints the attacks' claims and the auditor's passes
    both (two families at 5% each would reach about 10% together); copies, the given tables are unchanged."""
    tables = [t.copy() for t in tables]
    tested = [(k, i, float(t.at[i, "p_value"])) for k, t in enumerate(tables) if "testable" in t
              for i in t.index[t["testable"].astype(bool)]]
    for (k, i, _), rejected in zip(tested, holm([p for _, _, p in tested])):
        tables[k].at[i, "rejected"] = rejected
    for table in tables:
        if not table.empty:
            table["holm_family"] = len(tested)
    return tables


def _guessers(results: pd.DataFrame) -> pd.Series:
    """Each record's guesser: its attack, named with its adversary where one setting's label records come from several
    (records without their variants: an audit's report keeps ``--all-adversaries``' adversaries apart as variants,
    ``partition.adversary=2``): the adversaries of one seed guess the same canaries, so each is a guesser of its own,
    pooled over seeds only and counted among the planned attacks, never pooled with another's."""
    if "adversary" not in results:
        return results["attack"]
    adversary = results["adversary"].fillna("").astype(str)
    several = adversary.groupby([results[c] for c in GROUP], sort=False, dropna=False).transform("nunique") > 1
    return results["attack"].where(~several, results["attack"].astype(str) + " by party " + adversary)


def _key(key: tuple) -> tuple:
    """A group key with its NaNs made comparable (two NaNs of two groupbys are not equal)."""
    return tuple("<nan>" if isinstance(v, float) and np.isnan(v) else v for v in key)


def _claim_note(setting: pd.DataFrame) -> str:
    """Why a DP defense of the setting records no epsilon, or a read withholds it (its runs' notes), or ''."""
    notes = [n for n in setting["notes"].dropna().astype(str) for n in n.split("; ")
             if "no epsilon recorded" in n or n.startswith("epsilon withheld:")] if "notes" in setting else []
    return notes[0] if notes else ""
