import pandas as pd
import pytest

from vflpriv.tradeoff.cap import cap, cap_table

# FedHSSL paper Table XI: (lambda_f -> (A, U)) for FedLocalSimSiam, FedHSSL-SimSiam 20% and 40%, and the
# CAP values Table XII reports for them. Recomputing XII from XI checks the formula.
TABLE_XI = {
    "NUSWIDE": [[(0.471, 0.494), (0.465, 0.487), (0.449, 0.458)],
                [(0.471, 0.538), (0.449, 0.519), (0.443, 0.503)],
                [(0.474, 0.533), (0.471, 0.528), (0.458, 0.503)]],
    "Avazu": [[(0.548, 0.582), (0.546, 0.577), (0.545, 0.576)],
              [(0.568, 0.614), (0.565, 0.602), (0.563, 0.594)],
              [(0.571, 0.616), (0.566, 0.610), (0.561, 0.603)]],
    "BHI": [[(0.710, 0.756), (0.699, 0.732), (0.685, 0.710)],
            [(0.692, 0.783), (0.672, 0.764), (0.674, 0.758)],
            [(0.686, 0.788), (0.687, 0.773), (0.682, 0.764)]],
    "Modelnet": [[(0.438, 0.597), (0.415, 0.573), (0.408, 0.564)],
                 [(0.451, 0.652), (0.447, 0.613), (0.415, 0.594)],
                 [(0.466, 0.658), (0.448, 0.631), (0.419, 0.598)]],
}
TABLE_XII = {"NUSWIDE": (0.258, 0.284, 0.277), "Avazu": (0.262, 0.262, 0.264),
             "BHI": (0.221, 0.246, 0.244), "Modelnet": (0.334, 0.348, 0.349)}


@pytest.mark.parametrize("dataset", sorted(TABLE_XI))
def test_table_xi_gives_table_xii(dataset):
    for rows, reported in zip(TABLE_XI[dataset], TABLE_XII[dataset]):
        attack, utility = zip(*rows)
        assert cap(utility, attack) == pytest.approx(reported, abs=1e-3)  # the paper rounds or truncates


def test_cap_edges():
    assert cap([1.0], [0.0]) == 1.0 and cap([0.8, 0.6], [1.0, 1.0]) == 0.0
    with pytest.raises(ValueError):
        cap([0.5], [0.1, 0.2])
    with pytest.raises(ValueError):
        cap([], [])


def test_cap_table_mean_std_over_seeds_and_skips_incomplete():
    rows = []
    for seed, (u, a) in enumerate([(0.8, 0.5), (0.6, 0.5)]):
        for strength in (1, 5):
            rows.append(dict(method="m", dataset="d", attack="mc", defense="iso", phase="finetune",
                             strength=strength, seed=seed, utility=u, attack_accuracy=a, status="ok"))
    rows.append(dict(method="m", dataset="d", attack="mc", defense="iso", phase="finetune",
                     strength=1, seed=2, utility=1.0, attack_accuracy=0.0, status="ok"))
    table = cap_table(pd.DataFrame(rows))
    assert table["n_seeds"].item() == 2
    assert table["cap"].item() == pytest.approx(0.35)
    assert table["cap_std"].item() == pytest.approx(0.05)


def test_cap_optimistic_uses_the_best_epoch_accuracy_and_only_when_every_run_has_it():
    rows = [dict(method="m", dataset="d", attack="mc", defense="iso", phase="finetune", strength=s, seed=seed,
                 utility=0.8, attack_accuracy=0.5, attack_accuracy_optimistic=0.6, status="ok")
            for s in (1, 5) for seed in (0, 1)]
    table = cap_table(pd.DataFrame(rows))
    assert table["cap"].item() == pytest.approx(0.4) and table["cap_optimistic"].item() == pytest.approx(0.32)
    rows[0]["attack_accuracy_optimistic"] = float("nan")  # one run did not report it: no optimistic CAP
    table = cap_table(pd.DataFrame(rows))
    assert table["cap"].item() == pytest.approx(0.4) and pd.isna(table["cap_optimistic"].item())


def test_summary_keeps_each_strength_on_its_own_axis(tmp_path):
    from rich.console import Console

    from vflpriv.reports.plots import tradeoff_figures
    from vflpriv.reports.tables import strength_table
    from vflpriv.tradeoff.cap import strength_label, strength_summary

    rows = [dict(method="splitnn", dataset="digits", attack="mc", defense=d, phase="finetune", status="ok",
                 utility_metric="accuracy", strength_axis=axis, strength=s, seed=seed, utility=0.9,
                 attack_accuracy=0.8, prior_accuracy=0.7)
            for d, axis, s in [("label-dp", "epsilon", 1.0), ("iso", "lambda", 5.0)] for seed in (0, 1)]
    summary = strength_summary(pd.DataFrame(rows))
    labels = sorted(strength_label(r.strength_axis, r.strength) for r in summary.itertuples())
    assert labels == ["epsilon=1", "λ=5"]
    assert list(summary["n_seeds"]) == [2, 2]
    console = Console(record=True, width=200)
    console.print(strength_table(summary))
    text = console.export_text()
    assert "epsilon=1" in text and "λ=5" in text
    written = tradeoff_figures(summary, tmp_path, stem="p")
    assert {p.name for p in written} == {f"p_mc_{d}_finetune.{f}" for d in ("label-dp", "iso") for f in ("png", "svg", "pdf")}
    assert all(p.stat().st_size > 0 for p in written)


def test_worst_case_cap_equals_a_hand_computation():
    """At each strength and seed the strongest of the attacks and the prior; utility from the honest training (the
    acting attack C trained a federation of its own, with utility 0.1)."""
    acc = {  # (seed, strength): (A, B, C, prior)
        (0, 1): (0.9, 0.6, 0.95, 0.5), (0, 5): (0.4, 0.7, 0.3, 0.5),
        (1, 1): (0.3, 0.2, 0.1, 0.45), (1, 5): (0.55, 0.5, 0.2, 0.5),
    }
    utility = {(0, 1): 0.8, (0, 5): 0.6, (1, 1): 0.9, (1, 5): 0.7}
    rows = [dict(method="m", dataset="d", attack=name, defense="iso", phase="finetune", strength=s, seed=seed,
                 utility=0.1 if name == "C" else utility[seed, s], attack_accuracy=acc[seed, s][i],
                 prior_accuracy=acc[seed, s][3], training_under_attack=name == "C", status="ok", utility_metric="accuracy")
            for (seed, s) in acc for i, name in enumerate("ABC")]
    table = cap_table(pd.DataFrame(rows)).set_index("attack")
    seed0 = (0.8 * (1 - 0.95) + 0.6 * (1 - 0.7)) / 2
    seed1 = (0.9 * (1 - 0.45) + 0.7 * (1 - 0.55)) / 2
    assert table.loc["worst-case", "cap"] == pytest.approx((seed0 + seed1) / 2)
    assert table.loc["worst-case", "cap_std"] == pytest.approx(abs(seed0 - seed1) / 2)
    assert table.loc["worst-case", "cap"] < min(table.loc[a, "cap"] for a in "AB")
    from vflpriv.tradeoff.cap import strength_summary

    named = strength_summary(pd.DataFrame(rows)).set_index(["attack", "strength"])["strongest"]
    assert named["worst-case", 1] == "C, prior" and named["worst-case", 5] == "A, B"
