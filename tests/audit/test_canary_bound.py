"""The attacks' canary bounds in f-DP (vflpriv.common.canary_bound): a perfect guesser's f-DP bound is the exact
test's, one test chosen by delta decides a claim at the full level (exactly at most it on a tight mechanism), the cap
is where every guess right starts to reject, and the pooled worst case takes the chosen test per attack at its share
of the planned attacks."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from vflpriv.common import canary_bound, empirical_epsilon, fdp_one_run
from vflpriv.common.empirical_epsilon import ALPHA, kept, right_guess_bound
from vflpriv.engine.adversary import Inference
from vflpriv.runner.scoring import score_canaries
from vflpriv.store.records import RunRecord
from vflpriv.tradeoff.epsilon import epsilon_table


@pytest.mark.parametrize("canaries, classes", [(25, 10), (75, 10), (60, 2), (300, 2)])
def test_a_perfect_guesser_s_f_dp_bound_is_the_exact_test_s_in_the_record(canaries, classes):
    """Every canary guessed right at delta 0: both bounds are the exact binomial test's, q^m = alpha / menu (Steinke
    et al.'s is exact there, and the f-DP recursion meets it), so the record's two fields agree with it."""
    labels = torch.arange(canaries) % classes
    record = RunRecord(key="k", method="m", dataset="d", attack="a", defense="none", phase="finetune", strength=0.0,
                       seed=0, canaries=canaries)
    score_canaries(record, Inference(predictions=labels.clone(), confidence=torch.arange(canaries, 0, -1).float()),
                   torch.arange(canaries), labels, classes=classes, delta=0.0, prior=None)
    q = (ALPHA / len(kept(canaries))) ** (1 / canaries)  # the largest entry, every guess right
    exact = math.log((classes - 1) * q / (1 - q))
    assert record.epsilon_lower == pytest.approx(exact, abs=1e-6)
    assert record.epsilon_fdp == pytest.approx(exact, abs=1e-6)


def test_at_delta_0_the_f_dp_bound_never_exceeds_steinke_s():
    """The argument that needs no correction at delta 0 (canary_bound's docstring), checked on every count of small
    games with abstention: the f-DP test rejects only where the binomial test does."""
    for classes, canaries in ((2, 20), (10, 20)):
        for guesses in (5, 12, 20):
            for right in range(guesses + 1):
                steinke = empirical_epsilon.epsilon_lower(guesses=guesses, right=right, canaries=canaries,
                                                          classes=classes)
                fdp = fdp_one_run.epsilon_lower(guesses=guesses, right=right, canaries=canaries, delta=0.0,
                                                classes=classes)
                assert fdp <= steinke + 1e-6, (classes, guesses, right)


def _tight_rejection_rate(*, epsilon: float, delta: float, classes: int, canaries: int, alpha: float) -> float:
    """The exact chance that the claim test (every canary guessed, one menu entry) rejects a true (epsilon, delta)
    claim of the tight mechanism: each canary's label revealed with probability delta, else C-ary randomised response
    at epsilon, so the right guesses are F + Binomial(m - F, q) with F ~ Binomial(m, delta)."""
    from scipy.stats import binom

    q, m = right_guess_bound(epsilon, classes), canaries
    mass = np.zeros(m + 1)
    for revealed in range(m + 1):
        mass[revealed:] += binom.pmf(revealed, m, delta) * binom.pmf(np.arange(m - revealed + 1), m - revealed, q)
    return sum(mass[v] for v in range(m + 1) if mass[v] > 1e-12 and canary_bound.menu_p_value(
        [[m, v]], canaries=m, classes=classes, epsilon=epsilon, delta=delta)[0] < alpha)


@pytest.mark.parametrize("classes, delta, canaries", [(2, 0.0, 200), (2, 1e-3, 200), (10, 1e-3, 50)])
def test_the_claim_test_is_at_its_level_on_a_tight_mechanism_and_a_doubled_level_breaks_it(classes, delta, canaries):
    """Computed exactly, not simulated: the chosen test (Steinke et al.'s at delta 0, f-DP above) rejects the tight
    mechanism's true claim in at most 5%, and close enough to it that a test at twice the level would reject it in
    more than 5% (so a wrong level, as the old split's, cannot pass)."""
    at_level = _tight_rejection_rate(epsilon=2.0, delta=delta, classes=classes, canaries=canaries, alpha=ALPHA)
    doubled = _tight_rejection_rate(epsilon=2.0, delta=delta, classes=classes, canaries=canaries, alpha=2 * ALPHA)
    assert at_level <= ALPHA < doubled, (at_level, doubled)


def test_one_test_decides_each_claim_at_the_full_level_chosen_by_delta_alone():
    """Steinke et al.'s at delta 0, the f-DP one above, each at 5% (no share for the other): the bound and p-value are
    that module's own."""
    counts = [[300, 280], [150, 150], [75, 75], [30, 30]]
    assert canary_bound.menu_lower(counts, canaries=300, classes=10, delta=0.0) == \
        (*empirical_epsilon.menu_lower(counts, canaries=300, classes=10), canary_bound.STEINKE)
    for delta in (1e-5, 1e-3):
        assert canary_bound.menu_lower(counts, canaries=300, classes=10, delta=delta) == \
            (*fdp_one_run.menu_epsilon(counts, canaries=300, classes=10, delta=delta), canary_bound.FDP)
        p, _, test = canary_bound.menu_p_value(counts, canaries=300, classes=10, epsilon=4.0, delta=delta)
        assert test == canary_bound.FDP and p == fdp_one_run.menu_p_value(counts, canaries=300, classes=10,
                                                                          epsilon=4.0, delta=delta)[0]


def test_the_f_dp_p_value_is_rounded_up_so_it_rejects_at_its_own_value():
    """A p-value below a level must mean the recursion rejects there: rounded up (rejects at p), to within 1% (not at
    p / 1.01)."""
    for guesses, right in ((300, 280), (150, 150), (75, 60)):
        for epsilon in (1.0, 3.0):
            p = fdp_one_run.p_value(guesses=guesses, right=right, canaries=300, classes=10, epsilon=epsilon,
                                    delta=1e-3)
            if not 1e-300 < p < 1:
                continue
            inverse = fdp_one_run.inverse_eps_delta(epsilon, 1e-3)
            assert fdp_one_run.rejects(inverse, guesses=guesses, right=right, canaries=300, classes=10, alpha=p)
            assert not fdp_one_run.rejects(inverse, guesses=guesses, right=right, canaries=300, classes=10,
                                           alpha=p / 1.01)


@pytest.mark.parametrize("delta", [0.0, 1e-5, 1e-3])
def test_every_guess_right_rejects_a_claim_at_the_canaries_it_needs_and_not_one_fewer(delta):
    """The cap's correction, checked by the claim test the audit uses (tradeoff.epsilon.claim_test, A attacks, every
    guess right, the menu each run's counts carry: ``kept(n)``, repeats dropped below FULL_MENU_FROM canaries, pooled
    over the seeds): at canaries_needed the claim is rejected at 5%, at every count fewer it is not (one fewer, and
    every smaller count where the menu changes with the count)."""
    from vflpriv.tradeoff.epsilon import claim_test

    def rejected(n: int, *, seeds: int, classes: int, attacks: int, claim: float) -> bool:
        pooled = [[seeds * k, seeds * k] for k in kept(n)]
        perfect = {f"a{i}": (pooled, seeds * n) for i in range(attacks)}
        test = claim_test(perfect, planned=attacks, classes=classes, claim=claim, delta=delta)
        assert (test.p_value < ALPHA) is test.testable, (n, seeds, classes, attacks, claim, test)
        return test.testable

    for classes in (2, 10):
        for attacks in (1, 3):
            for claim in (0.3, 1.0, 2.5, 4.0):
                for seeds in (1, 3):
                    needed = canary_bound.canaries_needed(claim, classes=classes, attacks=attacks, delta=delta,
                                                          seeds=seeds)
                    n = needed // seeds
                    assert n * seeds == needed
                    fewer = range(1, n) if n <= canary_bound.FULL_MENU_FROM + 1 else [n - 1]
                    assert rejected(n, seeds=seeds, classes=classes, attacks=attacks, claim=claim)
                    assert not any(rejected(f, seeds=seeds, classes=classes, attacks=attacks, claim=claim)
                                   for f in fewer), (classes, attacks, claim, seeds, n)


def test_the_test_s_menu_needs_fewer_canaries_than_the_full_one_only_at_tiny_counts():
    """Below FULL_MENU_FROM canaries a run the claim test corrects over fewer menu entries: a pure claim of 0.3 with
    ten classes needs 2 canaries, where the full four-entry menu asked 3; from FULL_MENU_FROM on both agree."""
    assert canary_bound.canaries_needed(0.3, classes=10) == 2
    assert canary_bound.canaries_needed(0.3, classes=10, menu=len(empirical_epsilon.KEEP)) == 3
    for claim, classes in ((2.5, 10), (4.0, 2), (1.0, 2)):
        full = canary_bound.canaries_needed(claim, classes=classes, menu=len(empirical_epsilon.KEEP))
        assert full >= canary_bound.FULL_MENU_FROM
        assert canary_bound.canaries_needed(claim, classes=classes) == full


def test_an_absurd_claim_is_refused_at_once_by_the_closed_form_cap(monkeypatch):
    """The pure cap at MAX_CANARIES bounds every cap up to there: a claim at or above it raises without a search
    (binary canaries, delta 1e-5, five attacks: claims of 12.3 and 244 took 30 CPU s each before)."""
    ceiling = canary_bound.pure_cap(canaries=canary_bound.MAX_CANARIES, classes=2, attacks=5)
    assert canary_bound.cap(canaries=canary_bound.MAX_CANARIES, classes=2, attacks=5, delta=1e-5) <= ceiling
    assert canary_bound.pure_cap(canaries=300, classes=10, attacks=3) == pytest.approx(
        canary_bound.cap(canaries=300, classes=10, attacks=3), abs=1e-6)
    assert canary_bound.pure_cap(canaries=1, classes=2, attacks=5) == 0.0  # not negative where nothing is testable
    searched = []
    monkeypatch.setattr(canary_bound, "cap", lambda **kw: searched.append(kw) or 0.0)
    for claim in (12.3, 244.0):
        with pytest.raises(ValueError, match=r"no count of canaries up to 1000000 .*their cap is at most 12.0"):
            canary_bound.canaries_needed(claim, classes=2, attacks=5, delta=1e-5)
    assert searched == []  # refused without a search


def test_the_chosen_test_s_p_value_is_below_a_level_where_its_bound_exceeds_the_claim():
    counts = [[300, 290], [150, 150], [75, 75], [30, 30]]
    for delta in (0.0, 1e-5, 1e-3):
        bound = canary_bound.menu_lower(counts, canaries=300, classes=10, delta=delta)
        for claim, below in ((bound.epsilon - 0.01, True), (bound.epsilon + 0.01, False)):
            p = canary_bound.menu_p_value(counts, canaries=300, classes=10, epsilon=claim, delta=delta)[0]
            assert (p < ALPHA) is below, (delta, claim, p)


def _row(attack: str, counts, *, canaries: int, delta: float, epsilon: float = float("nan")) -> dict:
    return dict(method="m", dataset="d", defense="dp-gaussian", phase="finetune", strength=9.0, attack=attack, seed=0,
                status="ok", canaries=canaries, canary_counts=json.dumps(counts) if counts else "", num_classes=10,
                epsilon=epsilon, epsilon_delta=delta, epsilon_lower_delta=delta, strength_axis="sigma",
                strength_stronger="higher")


def test_the_pooled_worst_case_takes_the_chosen_test_per_attack_over_the_planned_attacks():
    """gc guessed 280 of 300 ten-class canaries at delta 1e-3, where Steinke et al.'s delta term certifies nothing and
    the f-DP bound a lot; mc and similarity were planned and guessed none: the worst case is gc's f-DP bound (the test
    at delta > 0) at 5% / 3 attacks, its row says which test, its cap is the f-DP recursion's with every canary right
    at 5% / (3 attacks x 4 menu entries), and gc's own row carries both at 5%."""
    gc = [[300, 280], [150, 150], [75, 75], [30, 30]]
    runs = [_row("gc", gc, canaries=300, delta=1e-3), _row("mc", None, canaries=300, delta=1e-3),
            _row("similarity", None, canaries=300, delta=1e-3)]
    table = epsilon_table(pd.DataFrame(runs)).set_index("attack")
    worst, alone = table.loc["worst-case"], table.loc["gc"]
    level = ALPHA / 3
    fdp = fdp_one_run.menu_epsilon(gc, canaries=300, delta=1e-3, classes=10, alpha=level)[0]
    steinke = empirical_epsilon.menu_lower(gc, canaries=300, classes=10, delta=1e-3, alpha=level)[0]
    assert steinke < 1.0 < fdp and worst["planned_attacks"] == 3
    assert worst["epsilon_lower"] == pytest.approx(fdp) and worst["bound_test"] == canary_bound.FDP
    assert worst["cap"] == pytest.approx(fdp_one_run.epsilon_lower(guesses=300, right=300, canaries=300, delta=1e-3,
                                                                    classes=10, alpha=ALPHA / (3 * 4)))
    assert alone["epsilon_fdp"] == pytest.approx(fdp_one_run.menu_epsilon(gc, canaries=300, delta=1e-3,
                                                                          classes=10)[0])
    assert alone["epsilon_lower"] == empirical_epsilon.menu_lower(gc, canaries=300, classes=10, delta=1e-3)[0]
    claimed = epsilon_table(pd.DataFrame([r | {"epsilon": fdp - 0.5} for r in runs])).set_index("attack")
    assert bool(claimed.loc["worst-case", "rejected"]) and claimed.loc["worst-case", "rejecting_test"] == "f-DP"


def test_at_delta_0_the_worst_case_is_steinke_s_at_the_attack_share_alone():
    gc = [[300, 280], [150, 150]]
    runs = [_row("gc", gc, canaries=300, delta=0.0), _row("mc", None, canaries=300, delta=0.0)]
    worst = epsilon_table(pd.DataFrame(runs)).set_index("attack").loc["worst-case"]
    assert worst["epsilon_lower"] == empirical_epsilon.menu_lower(gc, canaries=300, classes=10, alpha=ALPHA / 2)[0]
    assert worst["bound_test"] == canary_bound.STEINKE
    q = (ALPHA / (2 * 2)) ** (1 / 300)  # the exact test's cap, every canary right, 2 attacks x gc's 2 entries
    assert worst["cap"] == pytest.approx(math.log(9 * q / (1 - q)), abs=1e-6)


@pytest.mark.parametrize("canaries, classes", [(200, 2), (300, 10)])
def test_a_claim_called_testable_is_rejected_by_every_guess_right_and_one_at_its_cap_is_not_called_so(canaries,
                                                                                                     classes):
    """At delta > 0 the f-DP p-value is rounded up: a claim 1e-8 below the cap was "testable" yet every guess right
    gave p 0.0500000x, not rejected. Testable now means below the cap by CAP_MARGIN, where every guess right rejects."""
    from vflpriv.common import canary_bound

    at = canary_bound.cap(canaries=canaries, classes=classes, delta=1e-5)
    right = [[n, n] for n in canary_bound.empirical_epsilon.kept(canaries)]
    for below in (1e-8, 1e-7):
        assert not canary_bound.testable(at - below, at)
    claim = at - 2 * canary_bound.CAP_MARGIN
    assert canary_bound.testable(claim, at)
    p, _, _ = canary_bound.menu_p_value(right, canaries=canaries, classes=classes, epsilon=claim, delta=1e-5)
    assert p < 0.05
