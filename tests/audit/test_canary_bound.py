"""The attacks' canary bounds in f-DP (vflpriv.common.canary_bound): a perfect guesser's f-DP bound is the exact
test's, randomised response at a true epsilon is rejected at most at the level by the combined test, and the pooled
worst case takes the better bound per attack at its share of the planned attacks."""

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


def _rr_counts(rng: np.random.Generator, *, epsilon: float, classes: int, canaries: int) -> list[list[int]]:
    """An exact reader of C-ary randomised response at ``epsilon`` (each guess right with probability q), with an
    uninformative confidence: the menu's entries are nested prefixes of one random order."""
    right = rng.random(canaries) < right_guess_bound(epsilon, classes)
    return [[k, int(right[:k].sum())] for k in kept(canaries)]


@pytest.mark.parametrize("delta", [0.0, 1e-3])
def test_randomised_response_at_its_epsilon_is_rejected_at_most_at_the_level(delta):
    """Simulated: the combined test (the better of the two, Bonferroni over the menu and, at delta > 0, the two tests)
    rejects a true claim in at most alpha of the runs (plus Monte Carlo slack), at a count where the f-DP test is the
    one that can reject (at delta 1e-3 Steinke et al.'s delta term swamps 150 canaries)."""
    rng = np.random.default_rng(48)
    runs, rejected, by_fdp = 500, 0, 0
    for _ in range(runs):
        counts = _rr_counts(rng, epsilon=2.0, classes=2, canaries=150)
        p, _, test = canary_bound.menu_p_value(counts, canaries=150, classes=2, epsilon=2.0, delta=delta)
        rejected += p < ALPHA
        by_fdp += p < ALPHA and test == canary_bound.FDP
    assert rejected / runs <= ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / runs)
    assert by_fdp == rejected if delta else by_fdp == 0  # the f-DP test decides at delta > 0, never at 0


def test_the_combined_p_value_is_below_a_level_where_the_combined_bound_exceeds_the_claim():
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


def test_the_pooled_worst_case_takes_the_better_bound_per_attack_over_the_planned_attacks():
    """gc guessed 280 of 300 ten-class canaries at delta 1e-3, where Steinke et al.'s delta term certifies nothing and
    the f-DP bound a lot; mc and similarity were planned and guessed none: the worst case is gc's better bound, each
    test at 5% / (3 attacks x 2 tests), its row says which test, and gc's own row carries both at 5%."""
    gc = [[300, 280], [150, 150], [75, 75], [30, 30]]
    runs = [_row("gc", gc, canaries=300, delta=1e-3), _row("mc", None, canaries=300, delta=1e-3),
            _row("similarity", None, canaries=300, delta=1e-3)]
    table = epsilon_table(pd.DataFrame(runs)).set_index("attack")
    worst, alone = table.loc["worst-case"], table.loc["gc"]
    level = ALPHA / (3 * 2)
    fdp = fdp_one_run.menu_epsilon(gc, canaries=300, delta=1e-3, classes=10, alpha=level)[0]
    steinke = empirical_epsilon.menu_lower(gc, canaries=300, classes=10, delta=1e-3, alpha=level)[0]
    assert steinke < 1.0 < fdp and worst["planned_attacks"] == 3
    assert worst["epsilon_lower"] == pytest.approx(fdp) and worst["bound_test"] == canary_bound.FDP
    assert worst["cap"] == pytest.approx(canary_bound.cap(canaries=300, classes=10, attacks=3, delta=1e-3))
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
