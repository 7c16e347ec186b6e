"""The audit's statistics: the paired test's interval matches Student's formula, verdicts follow it."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from vflpriv.tradeoff.leakage import falls_to_prior, paired_leakage, strength_verdicts


def test_interval_and_p_value_are_students_paired_t():
    attack = np.array([0.80, 0.85, 0.83, 0.90])
    prior = np.array([0.75, 0.78, 0.80, 0.81])
    test = paired_leakage(attack, prior)
    d = attack - prior
    half = stats.t.ppf(0.975, 3) * d.std(ddof=1) / math.sqrt(4)
    assert test.leakage == pytest.approx(d.mean())
    assert (test.ci_low, test.ci_high) == pytest.approx((d.mean() - half, d.mean() + half))
    assert test.p_value == pytest.approx(stats.ttest_rel(attack, prior, alternative="greater").pvalue)
    assert test.verdict == "yes"


def test_no_leakage_shown_below_the_margin_is_no_and_noise_is_inconclusive():
    prior = np.array([0.70, 0.72, 0.71, 0.69, 0.70])
    assert paired_leakage(prior + np.array([0.001, -0.002, 0.0, 0.001, -0.001]), prior, margin=0.02).verdict == "no"
    assert paired_leakage(prior + np.array([0.05, -0.06, 0.04, -0.05, 0.03]), prior, margin=0.02).verdict == "inconclusive"
    failed = paired_leakage(prior - np.array([0.40, 0.45, 0.50, 0.42, 0.47]), prior, margin=0.02)
    assert failed.verdict == "attack failed" and failed.ci_high < -0.02


def test_one_seed_has_no_test():
    test = paired_leakage(np.array([0.9]), np.array([0.1]))
    assert test.verdict == "inconclusive" and math.isnan(test.ci_low) and test.to_dict()["ci_low"] is None


def _swept(axis, stronger, leak_by_strength):
    """Per strength, three seeds whose leakage is the given one -0.005, +0, +0.005 (a t interval of +-0.0124)."""
    return pd.DataFrame([dict(strength=s, strength_axis=axis, strength_stronger=stronger, seed=k, status="ok",
                              attack_accuracy=0.5 + leak + 0.005 * (k - 1), prior_accuracy=0.5, utility=0.9)
                         for s, leak in leak_by_strength.items() for k in (0, 1, 2)])


def test_falls_to_prior_walks_from_weak_to_strong_on_the_defense_axis():
    noise = _swept("lambda", "higher", {1.0: 0.2, 5.0: 0.005, 25.0: -0.1})
    assert falls_to_prior(noise)["strength"] == 5.0
    epsilon = _swept("epsilon", "lower", {8.0: 0.2, 2.0: 0.005, 1.0: -0.1})  # lower epsilon protects more
    assert falls_to_prior(epsilon)["strength"] == 2.0
    assert falls_to_prior(_swept("lambda", "higher", {1.0: 0.2, 5.0: 0.1})) is None


def test_a_strength_falls_only_where_its_own_test_says_no_and_no_stronger_one_leaks():
    """Review fe F2 (label side): a mean leakage within the margin is not a fall where the strength's own test reads
    "yes" (one seed's 1000 targets: +0.015 with its interval above 0), nor one reading "no" below a stronger "yes";
    the cell then says each strength's verdict."""
    from vflpriv.reports.tables import falls_text

    def hits(strength, seed, attack_right):  # the prior right on the first 500 targets, the attack on ``attack_right``
        return dict(strength=strength, strength_axis="lambda", strength_stronger="higher", seed=seed, status="ok",
                    utility=0.8, attack_accuracy=attack_right / 1000, prior_accuracy=0.5,
                    attack_hits="1" * attack_right + "0" * (1000 - attack_right), prior_hits="1" * 500 + "0" * 500)

    significant = pd.DataFrame([hits(1.0, 0, 515)])  # +0.015 < margin 0.02, interval [+0.0075, +0.0225]
    assert falls_to_prior(significant) is None
    assert falls_text(None, "lambda", strength_verdicts(significant), compared=True) == \
        "not at the prior: λ=1 leaks beyond the prior"
    later = pd.DataFrame([hits(1.0, 0, 500), hits(5.0, 0, 560), hits(25.0, 0, 500)])  # no, yes, no
    assert strength_verdicts(later) == [(1.0, "no"), (5.0, "yes"), (25.0, "no")]
    assert falls_to_prior(later)["strength"] == 25.0


def test_per_target_interval_on_constructed_predictions():
    """100 targets: the attack right on all, the prior on the first 50: leakage 0.5, se sqrt(var(d) / 100)."""
    from vflpriv.tradeoff.leakage import SAMPLE_TEST_NAME, sample_paired_leakage

    test = sample_paired_leakage(["1" * 100], ["1" * 50 + "0" * 50])
    assert test.leakage == 0.5 and test.verdict == "yes" and test.test == SAMPLE_TEST_NAME
    se = math.sqrt(np.var([1] * 50 + [0] * 50, ddof=1) / 100)
    assert (test.ci_low, test.ci_high) == pytest.approx((0.5 - 1.96 * se, 0.5 + 1.96 * se))
    assert test.p_value == pytest.approx(stats.norm.sf(0.5 / se))
    # two seeds that disagree: the between-seed variance widens the interval beyond either seed's own
    split = sample_paired_leakage(["1" * 100, "1" * 100], ["1" * 50 + "0" * 50, "1" * 95 + "0" * 5])
    assert split.leakage == pytest.approx(0.275, abs=0.01) and split.ci_high - split.ci_low > 4 * 1.96 * se
    same = sample_paired_leakage(["0110" * 25, "1" * 10], ["0110" * 25, "1" * 10])
    assert (same.leakage, same.ci_low, same.ci_high, same.verdict) == (0.0, 0.0, 0.0, "no")
    # independent attack and prior of the same accuracy: the 95% interval covers 0 about 95% of the time
    rng = np.random.default_rng(0)
    covered = 0
    for _ in range(200):
        a, p = (rng.random((3, 150)) < 0.7 for _ in range(2))
        t = sample_paired_leakage(["".join("1" if v else "0" for v in row) for row in a],
                                  ["".join("1" if v else "0" for v in row) for row in p])
        covered += t.ci_low <= 0 <= t.ci_high
    assert 0.88 <= covered / 200 <= 0.99, covered
    with pytest.raises(ValueError):
        sample_paired_leakage(["11"], ["1"])


def test_the_random_effects_pool_is_dersimonian_laird_by_hand():
    """Two seeds of different size and leakage: fixed weights 1/v, Cochran's Q, tau^2 = (Q - 1) / (S1 - S2 / S1),
    weights 1 / (v + tau^2), the pooled mean and its normal interval."""
    from vflpriv.tradeoff.leakage import sample_paired_leakage

    a_hits, p_hits = ["1" * 30 + "0" * 10, "1" * 12 + "0" * 48], ["0" * 40, "0" * 60]
    d = [np.array([1.0] * 30 + [0.0] * 10), np.array([1.0] * 12 + [0.0] * 48)]
    m = np.array([x.mean() for x in d])
    v = np.array([x.var(ddof=1) / x.size for x in d])
    w = 1 / v
    q = float((w * (m - (w * m).sum() / w.sum()) ** 2).sum())
    tau2 = max(0.0, (q - 1) / (w.sum() - (w**2).sum() / w.sum()))
    assert tau2 > 0  # the seeds disagree
    w = 1 / (v + tau2)
    pooled, se = (w * m).sum() / w.sum(), math.sqrt(1 / w.sum())
    test = sample_paired_leakage(a_hits, p_hits)
    assert test.leakage == pytest.approx(pooled) and test.ci_low == pytest.approx(pooled - 1.96 * se)
    assert test.p_value == pytest.approx(stats.norm.sf(pooled / se)) and test.n_targets == 100


def test_seeds_without_sampling_noise_pool_by_the_spread_of_their_means():
    from vflpriv.tradeoff.leakage import sample_paired_leakage

    one = sample_paired_leakage(["11"], ["00"])  # one seed, every pair differs the same way: no noise at all
    assert (one.leakage, one.ci_low, one.ci_high, one.p_value, one.verdict) == (1.0, 1.0, 1.0, 0.0, "yes")
    single = sample_paired_leakage(["1", "1"], ["0", "0"])  # one target per seed: no within-seed variance
    assert (single.ci_low, single.ci_high, single.p_value) == (1.0, 1.0, 0.0)
    spread = sample_paired_leakage(["1", "0"], ["0", "0"])  # means 1 and 0 over two seeds
    assert spread.leakage == 0.5 and spread.ci_low == pytest.approx(0.5 - 1.96 * math.sqrt(0.5 / 2))
    none = sample_paired_leakage(["01"], ["01"])
    assert (none.p_value, none.verdict) == (1.0, "no")
    noisy = sample_paired_leakage(["10"], ["00"])  # two targets: var(d) = 0.5, se = sqrt(0.5 / 2)
    assert noisy.ci_low == pytest.approx(0.5 - 1.96 * 0.5) and noisy.verdict == "inconclusive"
    with pytest.raises(ValueError, match="same, non-empty target set"):
        sample_paired_leakage(["10"], ["0"])


def test_two_seeds_get_a_t_interval_and_identical_seeds_an_exact_one():
    two = paired_leakage(np.array([0.8, 0.9]), np.array([0.7, 0.7]))
    half = stats.t.ppf(0.975, 1) * np.std([0.1, 0.2], ddof=1) / math.sqrt(2)
    assert (two.ci_low, two.ci_high) == pytest.approx((0.15 - half, 0.15 + half))
    same = paired_leakage(np.array([0.5, 0.5]), np.array([0.5, 0.5]))
    assert (same.ci_low, same.ci_high, same.p_value, same.verdict) == (0.0, 0.0, 1.0, "no")
    up = paired_leakage(np.array([0.75, 0.75]), np.array([0.5, 0.5]))
    assert (up.ci_low, up.p_value, up.verdict) == (0.25, 0.0, "yes")


def test_the_per_target_test_needs_every_record_s_outcomes_else_the_per_seed_one():
    from vflpriv.tradeoff.leakage import SAMPLE_TEST_NAME, TEST_NAME, leakage_test

    records = pd.DataFrame([dict(seed=s, status="ok", attack_accuracy=0.75, prior_accuracy=0.5, attack_hits="1101",
                                 prior_hits="0101") for s in (0, 1)])
    assert leakage_test(records).test == SAMPLE_TEST_NAME
    for broken in ("", "110", None):
        partial = records.copy()
        partial.loc[1, "attack_hits"] = broken
        assert leakage_test(partial).test == TEST_NAME, broken
    prior_missing = records.copy()
    prior_missing.loc[0, "prior_hits"] = None
    assert leakage_test(prior_missing).test == TEST_NAME
    assert leakage_test(records.drop(columns=["prior_hits"])).test == TEST_NAME
    failed = records.assign(status=["ok", "failed"])
    assert leakage_test(failed).n_seeds == 1


def test_falls_to_prior_reports_that_strength_s_numbers_and_one_seed_without_targets_is_no_test():
    rows = _swept("lambda", "higher", {1.0: 0.4, 5.0: 0.001}).assign(utility=[0.8] * 3 + [0.7] * 3)
    assert falls_to_prior(rows, margin=0.25) == {"strength": 5.0, "axis": "lambda", "leakage": pytest.approx(0.001),
                                                 "utility": pytest.approx(0.7)}
    assert falls_to_prior(rows[rows["strength"] == 5.0], margin=0.25)["axis"] == "lambda"
    assert falls_to_prior(rows.assign(status="failed")) is None
    assert falls_to_prior(rows[rows["seed"] == 0], margin=0.25) is None  # one seed, per seed: inconclusive


def test_the_means_reported_are_the_attack_s_and_the_prior_s_hit_rates():
    from vflpriv.tradeoff.leakage import paired_leakage, sample_paired_leakage

    one = sample_paired_leakage(["1100"], ["1000"])
    assert (one.attack_mean, one.prior_mean, one.leakage) == (0.5, 0.25, 0.25)
    several = paired_leakage([0.6, 0.7, 0.8], [0.5, 0.5, 0.6])
    assert several.attack_mean == pytest.approx(0.7) and several.prior_mean == pytest.approx(0.5 + 0.1 / 3)
    single = paired_leakage([0.6], [0.5])
    assert single.attack_mean == pytest.approx(0.6) and single.prior_mean == pytest.approx(0.5)


@pytest.mark.parametrize(("low", "high", "verdict"), [
    (0.001, 0.1, "yes"), (0.0, 0.1, "inconclusive"),  # strictly above 0: leaks
    (-0.1, -0.0201, "attack failed"), (-0.1, -0.02, "no"),  # strictly below -margin: failed; at it: within
    (-0.01, 0.0199, "no"), (-0.01, 0.02, "inconclusive"),  # strictly below +margin: no leakage; at it: not shown
])
def test_the_verdict_rule_at_its_boundaries(low, high, verdict):
    from vflpriv.tradeoff.leakage import _verdict

    assert _verdict(low, high, 0.02) == verdict


def test_hit_strings_of_unequal_seed_counts_are_refused_not_truncated():
    from vflpriv.tradeoff.leakage import sample_paired_leakage

    with pytest.raises(ValueError):
        sample_paired_leakage(["10"], ["10", "01"])


def test_empty_hit_strings_are_refused():
    from vflpriv.tradeoff.leakage import sample_paired_leakage

    with pytest.raises(ValueError, match="the same, non-empty target set"):
        sample_paired_leakage(["10", ""], ["10", ""])


def test_a_noise_free_seed_weighs_most_and_the_leakage_stays_finite():
    """A seed whose paired differences do not vary has within-seed variance 0: its weight is capped (1e-12), not
    infinite, so the pooled leakage is that seed's value, not NaN."""
    from vflpriv.tradeoff.leakage import sample_paired_leakage

    test = sample_paired_leakage(["11", "10"], ["00", "00"])
    assert math.isfinite(test.leakage) and test.leakage == pytest.approx(1.0, abs=1e-6)
