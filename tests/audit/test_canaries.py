"""Random-label canaries and the empirical epsilon: the bound against hand computations, its soundness by simulation,
the canaries' place in the scenario, and what a run makes of them."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import binom

from vflpriv.common.empirical_epsilon import ALPHA, epsilon_lower, kept, menu_lower, p_value, right_guess_bound
from vflpriv.config.schema import RunConfig
from vflpriv.runner.execution import run
from vflpriv.runner.planning import plan


def _direct_lower(guesses: int, right: int, classes: int, alpha: float = ALPHA) -> float:
    """The bound computed another way: the largest epsilon on a fine grid whose binomial tail is below alpha."""
    grid = np.linspace(0, 12, 120001)
    q = 1 / (1 + (classes - 1) * np.exp(-grid))
    tails = binom.sf(right - 1, guesses, q)
    rejected = grid[tails < alpha]
    return float(rejected.max()) if rejected.size else 0.0


@pytest.mark.parametrize(("guesses", "right", "classes"), [(100, 100, 2), (1000, 1000, 2), (100, 100, 10),
                                                           (50, 20, 10), (200, 130, 2), (30, 3, 10)])
def test_the_bound_matches_a_direct_computation(guesses, right, classes):
    ours = epsilon_lower(guesses=guesses, right=right, canaries=guesses, classes=classes)
    assert abs(ours - _direct_lower(guesses, right, classes)) < 2e-4


def test_the_sizes_the_issue_names_every_guess_right():
    """Binary: 100 canaries certify at most about 3.5, 1000 about 5.8 (q^m = 0.05 solved for epsilon)."""
    assert epsilon_lower(guesses=100, right=100, canaries=100, classes=2) == pytest.approx(
        math.log(0.05 ** 0.01 / (1 - 0.05 ** 0.01)), abs=1e-6)
    assert epsilon_lower(guesses=1000, right=1000, canaries=1000, classes=2) == pytest.approx(5.81, abs=0.01)
    assert epsilon_lower(guesses=100, right=10, canaries=100, classes=10) == 0.0  # chance certifies nothing


def test_abstention_takes_the_best_of_the_menu_each_at_the_bonferroni_level():
    counts = [[100, 40], [50, 30], [25, 20], [10, 9]]
    level = ALPHA / len(counts)
    singles = [epsilon_lower(guesses=g, right=r, canaries=100, classes=10, alpha=level) for g, r in counts]
    bound, guesses = menu_lower(counts, canaries=100, classes=10)
    assert bound == max(singles) and guesses == counts[singles.index(max(singles))][0]
    assert bound < max(epsilon_lower(guesses=g, right=r, canaries=100, classes=10) for g, r in counts)  # corrected
    assert kept(100) == [100, 50, 25, 10] and kept(3) == [3, 2, 1] and kept(0) == []


def test_the_delta_term_is_steinke_et_al_s_for_two_classes_by_hand():
    guesses, right, canaries, eps, delta = 3, 2, 4, 1.0, 0.01
    q = 1 / (1 + math.exp(-eps))
    tail = 3 * q * q * (1 - q) + q ** 3
    pmf = [binom.pmf(k, 3, q) for k in range(4)]
    shift = max(pmf[1] / 1, (pmf[1] + pmf[0]) / 2)  # P[v - i <= B < v] / i for i = 1, 2
    expected = tail + delta * 2 * canaries * shift
    assert p_value(guesses=guesses, right=right, canaries=canaries, classes=2, epsilon=eps,
                   delta=delta) == pytest.approx(expected)
    assert p_value(guesses=guesses, right=right, canaries=canaries, classes=2, epsilon=eps) == pytest.approx(tail)


@pytest.mark.parametrize(("classes", "epsilon", "canaries"), [(10, 2.0, 1000), (2, 1.0, 100), (10, 0.5, 200)])
def test_the_bound_is_sound_for_randomised_response_with_a_perfect_attacker(classes, epsilon, canaries):
    """A perfect attacker reads the randomised label: its right guesses are Binomial(m, q_eps) exactly, so the 95%
    bound may exceed the true epsilon in about 5% of trainings and no more (400 simulated trainings)."""
    rng = np.random.default_rng(7)
    q = right_guess_bound(epsilon, classes)
    bounds = np.array([epsilon_lower(guesses=canaries, right=int(rng.binomial(canaries, q)), canaries=canaries,
                                     classes=classes) for _ in range(400)])
    assert (bounds > epsilon).mean() <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 400)
    if canaries == 1000:  # and it comes close: the median within 0.25 of the truth at 1000 canaries
        assert epsilon - 0.25 <= np.median(bounds) <= epsilon


def _config(**changes) -> RunConfig:
    data = {"partition": {"labeled": 200, "aux": 40, "canaries": 40}, "finetune": {"epochs": 5},
            "model": {"hidden": 64, "out_dim": 32}, "attack": {"name": "gc", "prior": "aux", "prior_epochs": 30}}
    for key, value in changes.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    return RunConfig.model_validate(data)


@pytest.mark.parametrize("source", ["unlabeled", "labeled"])
def test_canaries_are_labeled_aligned_samples_never_auxiliary_and_leave_the_rest_of_the_scenario_alone(source):
    p = plan(_config(partition={"aux_source": source}))
    s, base = p.scenario, plan(_config(partition={"aux_source": source, "canaries": 0})).scenario
    assert s.canaries.numel() == 40 and bool(torch.isin(s.canaries, s.labeled).all())
    assert not bool(torch.isin(s.canaries, s.aux).any())
    for name in ("aligned", "labeled", "aux"):
        assert torch.equal(getattr(s, name), getattr(base, name))
    assert set(s.canary_labels.tolist()) <= set(range(10)) and len(set(s.canary_labels.tolist())) > 5


def test_the_active_party_trains_with_the_drawn_labels_and_a_defense_s_stream_never_moves_them():
    from vflpriv.runner.execution import build_federation

    defended = [plan(_config(defenses=[{"name": "iso", "strength": s, "sweep": True}])) for s in (1.0, 5.0)]
    label_dp = plan(_config(defenses=[{"name": "label-dp", "strength": 1.0, "sweep": True}]))
    first = defended[0].scenario
    for other in (*defended[1:], label_dp):
        assert torch.equal(other.scenario.canaries, first.canaries)
        assert torch.equal(other.scenario.canary_labels, first.canary_labels)
    fed = build_federation(defended[0])
    assert torch.equal(fed.active.labels[first.canaries].cpu(), first.canary_labels)


def test_a_run_scores_the_canaries_apart_the_prior_guesses_them_at_chance_and_gc_certifies_a_leak(tmp_path, monkeypatch):
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path))
    (plain,) = run(_config(partition={"canaries": 0}))
    (record,) = run(_config(partition={"canaries": 100}))
    assert record.status == "ok" and record.canaries == 100
    assert record.n_targets == plain.n_targets - 100  # the regular scoring leaves the canaries out
    assert 0.0 <= record.canary_prior_accuracy <= 0.25  # 100 uniform labels over 10 classes: about 0.1
    assert record.canary_accuracy > 0.9 and record.epsilon_lower > 3.0  # undefended split learning: gc reads them
    assert record.epsilon_lower_delta == 0.0 and math.isnan(record.epsilon)
    assert record.canary_guesses in kept(100) and record.canary_counts


def test_label_dp_s_empirical_epsilon_stays_below_its_claim(tmp_path, monkeypatch):
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path))
    for seed in (0, 1):
        (record,) = run(_config(partition={"canaries": 100}, seed=seed,
                                defenses=[{"name": "label-dp", "strength": 1.0, "sweep": True}]))
        assert record.epsilon == 1.0 and record.epsilon_lower_delta == 0.0
        assert record.epsilon_lower <= record.epsilon


def test_the_audit_reports_each_setting_s_empirical_epsilon_beside_its_claim_and_what_the_canaries_cost(tmp_path,
                                                                                                       monkeypatch):
    import json

    from typer.testing import CliRunner

    from vflpriv.cli import app

    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "audit"
    result = CliRunner().invoke(app, [
        "audit", "--method", "splitnn", "--attacks", "gc", "--defenses", "label-dp", "--seeds", "0", "--canaries", "60",
        "--no-tune-attacks", "--out", str(out), "--jobs", "1", "--set", "finetune.epochs=5",
        "--set", "model.hidden=64", "--set", "model.out_dim=32", "--set", "audit.prior=aux",
        "--set", "audit.prior_epochs=30"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "audit.json").read_text())["canaries"]
    assert summary["canaries"] == 60
    assert summary["utility_with"]["trainings"] == 1 and summary["utility_without"]["trainings"] == 1
    rows = {(r["defense"], r["strength"], r["attack"]): r for r in summary["rows"]}
    assert rows[("none", 0.0, "gc")]["epsilon_lower"] > 2.0  # undefended split learning leaks its canaries
    for eps in (4.0, 2.0, 1.0):  # the audit's label-DP claims, all below the cap of 60 ten-class canaries
        row, worst = rows[("label-dp", eps, "gc")], rows[("label-dp", eps, "worst-case")]
        assert row["epsilon_claimed"] == eps and row["epsilon_lower"] <= eps and not worst["rejected"]
        assert worst["testable"] and eps < worst["cap"] and worst["planned_attacks"] == 1
    text = (out / "audit.md").read_text()
    assert "## Empirical epsilon (random-label canaries)" in text
    assert "claimed epsilon 1.00 (pure): not rejected" in text and f"cap {worst['cap']:.2f} with 60 canaries" in text
    assert "VIOLATED" not in text and "consistent" not in text
    verdicts = json.loads((out / "audit.json").read_text())["verdicts"]
    assert [v["attack"] for v in verdicts] == ["gc"]  # the training without canaries measures cost, not leakage
