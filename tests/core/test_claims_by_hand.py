"""The reproductions' claim statistics by hand: which runs a claim names, each kind's test against scipy's or the
formula written out, its boundaries both ways, the one-seed and infinite cases, and the not comparable reasons."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from vflpriv.common.errors import ConfigError
from vflpriv.workflows.reproductions.claims import _nan_p, judge, same, select


def _runs(**metric_by_method) -> pd.DataFrame:
    rows = []
    for method, values in metric_by_method.items():
        for seed, v in enumerate(values):
            rows.append({"method": method, "options": {}, "by": 0.2, "strength": 1.0, "seed": seed, "m": v})
    return pd.DataFrame(rows)


def _claim(kind: str, **spec) -> dict:
    return {"id": "c1", "text": "  a   claim ", kind: {"metric": "m", **spec}}


A, B = {"method": "a"}, {"method": "b"}


def test_select_keeps_the_runs_matching_method_options_by_and_strength():
    runs = pd.DataFrame([
        {"method": "a", "options": {"k": 1}, "by": 0.2, "strength": 1.0},
        {"method": "a", "options": {"k": 2}, "by": 0.2, "strength": 1.0},
        {"method": "a", "options": {}, "by": "0.4", "strength": 2.0},
        {"method": "b", "options": {"k": 1}, "by": 0.2, "strength": 1.0},
    ])
    assert list(select(runs, {"method": "a"}).index) == [0, 1, 2]
    assert list(select(runs, {"options": {"k": 1}}).index) == [0, 3]
    assert list(select(runs, {"method": "a", "by": 0.4}).index) == [2]  # numbers compare as numbers
    assert list(select(runs, {"strength": 1}).index) == [0, 1, 3]
    assert list(select(runs, {"method": "a", "default_options": ["k"]}).index) == [2]
    assert list(select(runs, {}).index) == [0, 1, 2, 3]
    assert same("1e-3", 0.001) and same("x", "x") and not same("x", "y") and not same(1.0, 1.001)


def test_greater_is_a_one_sided_welch_test_at_5_percent_with_its_margin():
    a, b = [0.81, 0.84, 0.86, 0.83], [0.78, 0.80, 0.79]
    for margin in (0.0, 0.02, -0.02, 0.06):
        p = stats.ttest_ind(np.array(a) - margin, b, equal_var=False, alternative="greater").pvalue
        verdict = judge(_claim("greater", a=A, b=B, margin=margin), _runs(a=a, b=b))
        assert verdict.verdict == ("held" if p < 0.05 else "not held"), (margin, p)
        assert f"p = {p:.3g}" in verdict.reason and verdict.text == "a claim" and verdict.id == "c1"
    assert judge(_claim("greater", a=B, b=A), _runs(a=a, b=b)).verdict == "not held"


def test_greater_holds_just_below_the_level_and_not_just_above():
    """The shift of a at which Welch's p crosses 5%, found by bisection: held on one side, not on the other."""
    b = [0.0, 1.0, 2.0]
    low, high = 0.0, 5.0
    for _ in range(60):
        mid = (low + high) / 2
        p = stats.ttest_ind(np.array(b) + mid, b, equal_var=False, alternative="greater").pvalue
        low, high = (low, mid) if p < 0.05 else (mid, high)
    held = judge(_claim("greater", a=A, b=B), _runs(a=list(np.array(b) + high), b=b))
    short = judge(_claim("greater", a=A, b=B), _runs(a=list(np.array(b) + low), b=b))
    assert held.verdict == "held" and short.verdict == "not held"


def test_greater_of_constant_seeds_and_of_one_seed():
    assert judge(_claim("greater", a=A, b=B), _runs(a=[2, 2, 2], b=[1, 1, 1])).verdict == "held"
    assert judge(_claim("greater", a=A, b=B), _runs(a=[1, 1, 1], b=[1, 1, 1])).verdict == "not held"
    assert judge(_claim("greater", a=A, b=B, margin=1), _runs(a=[2, 2, 2], b=[1, 1, 1])).verdict == "not held"
    one = judge(_claim("greater", a=A, b=B, margin=0.1), _runs(a=[0.5], b=[0.3, 0.35]))
    assert one.verdict == "held" and "one seed: no test" in one.reason
    assert judge(_claim("greater", a=A, b=B, margin=0.2), _runs(a=[0.5], b=[0.3, 0.35])).verdict == "not held"


def test_greater_with_a_target_never_reached_is_an_exact_mann_whitney_test():
    inf = math.inf
    b = [5.0, inf, 7.0]
    for a, margin in (([1.0, 2.0, 3.0], 0.0), ([6.0, 2.0, 3.0], 0.0), ([inf, inf, inf], 0.0), ([1.0, 2.0, 3.0], 1.5),
                      ([6.0, 7.5, inf], 1.5)):  # the margin moves a's ranks
        p = stats.mannwhitneyu(np.array(a) - margin, b, alternative="greater", method="exact").pvalue
        verdict = judge(_claim("greater", a=A, b=B, margin=margin), _runs(a=a, b=b))
        assert verdict.verdict == ("held" if p <= 0.05 else "not held") and f"p = {p:.3g}" in verdict.reason
        assert f"never reached: {a.count(inf)}/3 vs 1/3 seeds" in verdict.reason
    assert judge(_claim("greater", a=A, b=B), _runs(a=[inf, inf, inf], b=[1.0, 2.0, 3.0])).verdict == "held"
    one = judge(_claim("greater", a=A, b=B), _runs(a=[inf], b=[1.0, 2.0]))
    assert one.verdict == "held" and "one seed" in one.reason
    assert judge(_claim("greater", a=A, b=B, margin=1.5), _runs(a=[3.0], b=[1.0, inf])).verdict == "not held"


def test_above_is_a_one_sided_one_sample_t_test_and_one_seed_compares_the_value():
    a = [0.62, 0.58, 0.66, 0.61]
    for value in (0.55, 0.58, 0.60, 0.7):
        p = stats.ttest_1samp(a, value, alternative="greater").pvalue
        verdict = judge(_claim("above", a=A, value=value), _runs(a=a))
        assert verdict.verdict == ("held" if p < 0.05 else "not held") and f"p = {p:.3g}" in verdict.reason
    assert judge(_claim("above", a=A, value=0.5), _runs(a=[0.6, 0.6])).verdict == "held"  # constant: p is NaN
    assert judge(_claim("above", a=A, value=0.6), _runs(a=[0.6, 0.6])).verdict == "not held"
    assert judge(_claim("above", a=A, value=0.5), _runs(a=[0.51])).verdict == "held"
    assert judge(_claim("above", a=A, value=0.51), _runs(a=[0.51])).verdict == "not held"


def test_below_is_the_upper_end_of_the_95_percent_interval():
    a = np.array([0.10, 0.14, 0.12, 0.11])
    high = a.mean() + stats.t.ppf(0.975, 3) * a.std(ddof=1) / 2
    assert judge(_claim("below", a=A, value=high + 1e-9), _runs(a=list(a))).verdict == "held"
    assert judge(_claim("below", a=A, value=high - 1e-9), _runs(a=list(a))).verdict == "not held"
    assert judge(_claim("below", a=A, value=0.2), _runs(a=[0.19])).verdict == "held"  # one seed: its value
    assert judge(_claim("below", a=A, value=0.19), _runs(a=[0.19])).verdict == "not held"


def test_within_is_two_one_sided_welch_tests_the_90_percent_interval_inside_the_margin():
    a, b = np.array([0.80, 0.82, 0.81, 0.85]), np.array([0.79, 0.83, 0.80])
    va, vb = a.var(ddof=1) / 4, b.var(ddof=1) / 3
    df = (va + vb) ** 2 / (va**2 / 3 + vb**2 / 2)
    half = stats.t.ppf(0.95, df) * math.sqrt(va + vb)
    diff = a.mean() - b.mean()
    edge = max(abs(diff - half), abs(diff + half))
    assert judge(_claim("within", a=A, b=B, margin=edge + 1e-9), _runs(a=list(a), b=list(b))).verdict == "held"
    assert judge(_claim("within", a=A, b=B, margin=edge - 1e-9), _runs(a=list(a), b=list(b))).verdict == "not held"
    assert judge(_claim("within", a=B, b=A, margin=edge + 1e-9), _runs(a=list(a), b=list(b))).verdict == "held"
    same_seeds = judge(_claim("within", a=A, b=B, margin=0.01), _runs(a=[0.5, 0.5], b=[0.5, 0.5]))
    assert same_seeds.verdict == "held"  # no spread: the interval is the difference, 0
    assert judge(_claim("within", a=A, b=B, margin=0.05), _runs(a=[0.5], b=[0.53, 0.55])).verdict == "held"
    assert judge(_claim("within", a=A, b=B, margin=0.05), _runs(a=[0.5], b=[0.55, 0.57])).verdict == "not held"


def test_equals_needs_every_run_at_the_value():
    assert judge(_claim("equals", a=A, value=12), _runs(a=[12, 12, 12])).verdict == "held"
    assert judge(_claim("equals", a=A, value=12), _runs(a=[12, 13, 12])).verdict == "not held"


def test_missing_runs_metrics_or_kinds():
    runs = _runs(a=[0.5, 0.6])
    assert judge({"id": "x", "not_comparable": "another scale"}, runs).reason == "another scale"
    assert judge(_claim("above", a={"method": "z"}, value=0), runs).verdict == "not comparable"
    assert "no successful run of z" in judge(_claim("above", a={"method": "z"}, value=0), runs).reason
    assert "no successful run of b" in judge(_claim("greater", a=A, b=B), runs).reason
    assert judge({"id": "x", "above": {"metric": "gone", "a": A, "value": 0}}, runs).reason == "the records hold no gone"
    assert judge({"id": "x", "above": {"metric": "cap", "a": A, "value": 0}}, runs).verdict == "not comparable"
    nan = _runs(a=[0.5, float("nan"), 0.7])
    assert "2 runs" in judge(_claim("above", a=A, value=0.1), nan).reason  # NaN seeds left out
    with pytest.raises(ConfigError, match="exactly one of greater, above, below, within, equals"):
        judge({"id": "x", "above": {}, "below": {}}, runs)
    with pytest.raises(ConfigError, match="exactly one of"):
        judge({"id": "x"}, runs)


def test_a_cap_claim_reads_the_caps_frame():
    caps = _runs(a=[0.3, 0.31, 0.32]).rename(columns={"m": "cap"})
    verdict = judge({"id": "x", "above": {"metric": "cap", "a": A, "value": 0.25}}, _runs(a=[0.0]), caps=caps)
    assert verdict.verdict == "held" and verdict.reason.startswith("cap of a:")


def test_the_reason_names_the_runs_their_means_the_difference_and_the_test():
    where = {"method": "a", "by": 0.2, "strength": 1.0}
    a, b = [0.81, 0.84, 0.86, 0.83], [0.78, 0.80, 0.79]
    p = stats.ttest_ind(a, b, equal_var=False, alternative="greater").pvalue
    verdict = judge(_claim("greater", a=where, b=B), _runs(a=a, b=b))
    diff = np.mean(a) - np.mean(b)
    assert verdict.reason == (f"m: a at 0.2 strength 1.0 {np.mean(a):.3f} vs b {np.mean(b):.3f} "
                              f"({diff:+.3f}; one-sided Welch p = {p:.3g})")
    with_margin = judge(_claim("greater", a=where, b=B, margin=0.01), _runs(a=a, b=b))
    assert f"({diff:+.3f}, margin +0.01; one-sided Welch p = " in with_margin.reason


def test_one_seed_on_either_side_is_no_test():
    for a, b in (([0.5], [0.3, 0.35]), ([0.5, 0.55], [0.3])):
        verdict = judge(_claim("greater", a=A, b=B), _runs(a=a, b=b))
        assert verdict.verdict == "held" and verdict.reason.endswith("one seed: no test)")
        assert judge(_claim("within", a=A, b=B, margin=0.5), _runs(a=a, b=b)).reason.endswith("one seed: no test)")


def test_two_seeds_against_three_with_a_target_never_reached_is_never_held():
    """The exact Mann-Whitney test of 2 against 3 seeds cannot reach 5% (its smallest p is 1/10), however far apart."""
    inf = math.inf
    verdict = judge(_claim("greater", a=A, b=B), _runs(a=[inf, inf], b=[1.0, 2.0, 3.0]))
    assert verdict.verdict == "not held" and "p = 0.1" in verdict.reason


def test_an_equivalence_interval_touching_the_margin_is_not_inside_it():
    low = judge(_claim("within", a=A, b=B, margin=-(0.5 - 0.6)), _runs(a=[0.5, 0.5], b=[0.6, 0.6]))
    high = judge(_claim("within", a=A, b=B, margin=0.6 - 0.5), _runs(a=[0.6, 0.6], b=[0.5, 0.5]))
    assert low.verdict == high.verdict == "not held"
    assert judge(_claim("within", a=A, b=B, margin=0.11), _runs(a=[0.6, 0.6], b=[0.5, 0.5])).verdict == "held"


def test_a_claim_giving_no_kind_or_two_is_named_in_the_refusal():
    runs = _runs(a=[0.5, 0.6])
    with pytest.raises(ConfigError, match="claim 'x': give exactly one of"):
        judge({"id": "x", "text": "", "above": {}, "below": {}}, runs)
    with pytest.raises(ConfigError, match="claim 'a claim': give exactly one of"):
        judge({"text": "a claim"}, runs)


def test_above_holds_just_below_the_level_and_one_seed_is_no_test():
    a = np.array([0.0, 1.0, 2.0])
    low, high = 0.0, 5.0
    for _ in range(60):
        mid = (low + high) / 2
        p = stats.ttest_1samp(a + mid, 0.0, alternative="greater").pvalue
        low, high = (low, mid) if p < 0.05 else (mid, high)
    assert judge(_claim("above", a=A, value=0.0), _runs(a=list(a + high))).verdict == "held"
    assert judge(_claim("above", a=A, value=0.0), _runs(a=list(a + low))).verdict == "not held"
    assert judge(_claim("above", a=A, value=0.5), _runs(a=[0.51])).reason.endswith("one seed: no test)")


def test_two_seeds_get_the_test_not_the_one_seed_rule():
    """Two seeds far enough apart in mean but too spread for Welch's test: not held (the one-seed rule would hold)."""
    a, b = [0.9, 0.5, 0.95, 0.55], [0.3, 0.8]
    assert np.mean(a) > np.mean(b)
    assert judge(_claim("greater", a=A, b=B), _runs(a=a, b=b)).verdict == "not held"
    assert judge(_claim("greater", a=A, b=B), _runs(a=b, b=a)).verdict == "not held"
    inf = math.inf
    assert "p = 0.1" in judge(_claim("greater", a=A, b=B), _runs(a=[inf, inf, inf], b=[1.0, 2.0])).reason


def test_one_seed_with_a_target_never_reached_subtracts_the_margin():
    inf = math.inf
    assert judge(_claim("greater", a=A, b=B, margin=1.5), _runs(a=[inf, 5.0], b=[4.0])).verdict == "not held"
    assert judge(_claim("greater", a=A, b=B, margin=0.5), _runs(a=[inf, 5.0], b=[4.0])).verdict == "held"


def test_one_seed_within_its_margin_exactly_is_not_within():
    margin = -(0.5 - 0.6)
    assert judge(_claim("within", a=A, b=B, margin=margin), _runs(a=[0.5], b=[0.6, 0.6])).verdict == "not held"


def test_a_selector_without_a_method_reads_every_method():
    verdict = judge(_claim("above", a={"by": 0.2}, value=0.0), _runs(a=[0.5, 0.6], b=[0.7]))
    assert verdict.reason.startswith("m of every method at 0.2: ") and "3 runs" in verdict.reason


def test_a_not_comparable_claim_and_a_comparison_without_its_b_runs_read_not_comparable():
    runs = _runs(a=[0.5, 0.6])
    assert judge({"id": "x", "not_comparable": "another scale"}, runs).verdict == "not comparable"
    assert judge(_claim("greater", a=A, b=B), runs).verdict == "not comparable"


def test_a_claim_without_text_has_none_and_the_reason_names_the_selected_options():
    runs = _runs(a=[0.5, 0.6]).assign(options=[{"k": 1}, {"k": 1}])
    verdict = judge({"id": "x", "above": {"metric": "m", "a": {"method": "a", "options": {"k": 1}}, "value": 0.0}}, runs)
    assert verdict.text == "" and verdict.reason.startswith("m of a k=1: ")


def test_equals_prints_the_runs_values_to_six_decimals():
    assert "[0.123457] (claim: 0.123457)" in judge(_claim("equals", a=A, value=0.1234567), _runs(a=[0.1234567])).reason


def test_below_with_two_seeds_reads_the_interval_not_the_mean():
    """Two seeds whose mean is below the value but whose 95% upper end (t with 1 degree of freedom) is not."""
    assert judge(_claim("below", a=A, value=0.25), _runs(a=[0.1, 0.3])).verdict == "not held"


def test_a_nan_p_value_is_0_for_a_positive_difference_and_1_otherwise():
    """scipy versions that give NaN for constant samples with a difference are read as their sign says."""
    assert _nan_p(math.nan, 0.1) == 0.0 and _nan_p(math.nan, -0.1) == 1.0 and _nan_p(math.nan, 0.0) == 1.0
    assert _nan_p(0.3, 0.1) == 0.3


def test_two_seeds_of_a_get_welch_s_test_and_one_seed_exactly_at_the_margin_is_not_greater():
    assert judge(_claim("greater", a=A, b=B), _runs(a=[0.3, 0.8], b=[0.5, 0.52, 0.51])).verdict == "not held"
    assert judge(_claim("greater", a=A, b=B, margin=0.25), _runs(a=[0.75], b=[0.5, 0.5])).verdict == "not held"


def test_one_seed_each_that_never_reached_the_target_is_not_greater():
    inf = math.inf
    assert judge(_claim("greater", a=A, b=B), _runs(a=[inf], b=[inf])).verdict == "not held"


def test_within_gives_two_seeds_on_either_side_the_two_one_sided_tests():
    a, b = [0.5, 0.6], [0.55, 0.55, 0.56]  # |difference| well inside the margin, the interval far outside it
    assert judge(_claim("within", a=A, b=B, margin=0.1), _runs(a=a, b=b)).verdict == "not held"
    assert judge(_claim("within", a=A, b=B, margin=0.1), _runs(a=b, b=a)).verdict == "not held"


def test_within_is_not_held_when_the_interval_crosses_the_lower_margin_only():
    a, b = np.array([0.40, 0.43, 0.46, 0.41]), np.array([0.50, 0.50, 0.51])
    va, vb = a.var(ddof=1) / 4, b.var(ddof=1) / 3
    half = stats.t.ppf(0.95, (va + vb) ** 2 / (va**2 / 3 + vb**2 / 2)) * math.sqrt(va + vb)
    diff = a.mean() - b.mean()
    assert diff - half < -0.1 < diff + half < 0.1
    assert judge(_claim("within", a=A, b=B, margin=0.1), _runs(a=list(a), b=list(b))).verdict == "not held"
