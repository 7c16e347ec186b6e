"""``vflpriv reproduce``: the shipped analogues listed with their claims, each one's --quick run end to end (resumable),
its store (OUT/results.sqlite, no --store), and the claims judged on constructed records."""

from __future__ import annotations

import pandas as pd
import pytest
from cli_helpers import one_error_line
from typer.testing import CliRunner

from vflpriv.cli import app
from vflpriv.tradeoff import sweep as sweeping
from vflpriv.workflows import reproductions
from vflpriv.workflows.reproductions.claims import judge
from vflpriv.workflows.reproductions.report import caps, chosen, records


def test_list_names_every_analogue_and_its_claims():
    result = CliRunner().invoke(app, ["reproduce", "--list"])
    assert result.exit_code == 0, result.output
    for name in reproductions.names():
        analogue = reproductions.load(name)
        assert f"{name}: {analogue.title}" in result.output
        assert all(f"{c['id']}:" in result.output for c in analogue.claims)
    assert {"fedhssl-table4", "fedhssl-table6", "fedhssl-tables7-12", "oneshot-table1", "ssvfl-fig3",
            "vflhlp-tables23"} <= set(reproductions.names())


def test_an_unknown_analogue_is_one_error_line_naming_the_valid_ones():
    result = CliRunner().invoke(app, ["reproduce", "nope"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: unknown analogue 'nope'; valid analogues: {', '.join(reproductions.names())}"]


def _runs(values: dict[tuple[str, float], list[float]], metric: str = "utility") -> pd.DataFrame:
    rows = [{"method": m, "options": {}, "by": by, "seed": i, metric: v}
            for (m, by), vs in values.items() for i, v in enumerate(vs)]
    return pd.DataFrame(rows)


def test_claims_are_held_not_held_or_not_comparable_on_the_records():
    runs = _runs({("a", 1): [0.90, 0.91, 0.92], ("b", 1): [0.80, 0.81, 0.79], ("c", 1): [0.905, 0.80, 0.99]})
    greater = lambda a, b: {"id": "x", "greater": {"metric": "utility", "a": {"method": a}, "b": {"method": b}}}  # noqa: E731
    assert judge(greater("a", "b"), runs).verdict == "held"
    assert judge(greater("b", "a"), runs).verdict == "not held"
    noisy = judge(greater("c", "b"), runs)  # higher mean, but not beyond the seeds' noise
    assert noisy.verdict == "not held" and "Welch" in noisy.reason
    assert judge(greater("a", "missing"), runs).verdict == "not comparable"
    assert judge({"id": "y", "not_comparable": "no such baseline"}, runs).reason == "no such baseline"
    counts = _runs({("a", 1): [3, 3]}, "messages")
    assert judge({"equals": {"metric": "messages", "a": {"method": "a"}, "value": 3}}, counts).verdict == "held"
    assert judge({"equals": {"metric": "messages", "a": {"method": "a"}, "value": 5}}, counts).verdict == "not held"
    small = _runs({("a", 1): [0.001, -0.002, 0.0]}, "leakage")
    assert judge({"below": {"metric": "leakage", "a": {"method": "a"}, "value": 0.02}}, small).verdict == "held"


def test_above_within_and_a_margin_test_what_they_say():
    leak = _runs({("a", 1): [0.05, 0.06, 0.055], ("b", 1): [0.01, -0.01, 0.0]}, "leakage")
    above = lambda m: {"above": {"metric": "leakage", "a": {"method": m}, "value": 0}}  # noqa: E731
    assert judge(above("a"), leak).verdict == "held" and "one-sided t" in judge(above("a"), leak).reason
    assert judge(above("b"), leak).verdict == "not held"
    runs = _runs({("a", 1): [0.800, 0.810, 0.800], ("b", 1): [0.810, 0.815, 0.812], ("c", 1): [0.90, 0.91, 0.92]})
    worse = {"metric": "utility", "a": {"method": "a"}, "b": {"method": "b"}}
    assert judge({"greater": worse}, runs).verdict == "not held"  # a is below b ...
    assert judge({"greater": {**worse, "margin": -0.02}}, runs).verdict == "held"  # ... by less than 0.02
    assert judge({"greater": {**worse, "margin": -0.005}}, runs).verdict == "not held"
    assert judge({"within": {**worse, "margin": 0.03}}, runs).verdict == "held"
    assert judge({"within": {**worse, "margin": 0.01}}, runs).verdict == "not held"  # the interval reaches past it
    far = {"metric": "utility", "a": {"method": "c"}, "b": {"method": "b"}, "margin": 0.03}
    assert judge({"within": far}, runs).verdict == "not held"


def test_cap_claims_read_each_seeds_cap_over_its_strengths():
    from vflpriv.workflows.reproductions.report import caps

    rows = []
    for method, utility, attack in (("a", 0.9, 0.5), ("b", 0.8, 0.6)):
        for seed in range(3):
            for strength in (1.0, 5.0):
                if method == "b" and seed == 2 and strength == 5.0:
                    continue  # seed 2 of b lacks a strength: no CAP for it
                rows.append({"method": method, "options": {}, "by": 0.2, "seed": seed, "strength": strength,
                             "dataset": "d", "attack": "mc", "defense": "iso", "phase": "finetune", "status": "ok",
                             "utility": utility - 0.01 * seed - 0.05 * (strength > 1), "attack_accuracy": attack})
    found = caps(pd.DataFrame(rows))
    assert sorted(zip(found["method"], found["seed"])) == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1)]
    a0 = found[(found["method"] == "a") & (found["seed"] == 0)]["cap"].item()
    assert a0 == pytest.approx((0.9 * 0.5 + 0.85 * 0.5) / 2)
    claim = {"greater": {"metric": "cap", "a": {"method": "a", "by": 0.2}, "b": {"method": "b"}}}
    verdict = judge(claim, pd.DataFrame(rows), caps=found)
    assert verdict.verdict == "held" and "vs b 0.308 (+0.124" in verdict.reason  # seeds 0, 1 of b: 0.310, 0.306
    assert judge(claim, pd.DataFrame(rows)).verdict == "not comparable"  # no CAP without a sweep


def test_mb_to_target_reads_the_first_epoch_at_the_target_and_ranks_a_target_never_reached():
    import json
    import math

    from vflpriv.workflows.reproductions.report import mb_to_target

    curve = json.dumps([[0, 0.5, 0.40], [1, 1.0, 0.81], [2, 1.5, 0.79], [3, 2.0, 0.90]])
    assert mb_to_target(curve, 0.8) == 1.0 and mb_to_target(curve, 0.9) == 2.0
    assert mb_to_target(curve, 0.95) == math.inf and math.isnan(mb_to_target("", 0.8))
    runs = _runs({("vfl", 1): [math.inf, math.inf, 3.0], ("ssl", 1): [0.1, 0.2, 0.1], ("mix", 1): [0.05, math.inf, 2.0]},
                 "mb_to_target")
    claim = lambda a, b: {"greater": {"metric": "mb_to_target", "a": {"method": a}, "b": {"method": b}}}  # noqa: E731
    held = judge(claim("vfl", "ssl"), runs)  # every vfl seed above every ssl seed: exact p = 1/20
    assert held.verdict == "held" and "never reached: 2/3 vs 0/3" in held.reason and "p = 0.05" in held.reason
    assert judge(claim("ssl", "vfl"), runs).verdict == "not held"
    assert judge(claim("mix", "ssl"), runs).verdict == "not held"  # one mix seed is below the ssl ones


def test_a_strength_selects_the_runs_at_that_strength():
    runs = pd.DataFrame([{"method": "a", "options": {}, "by": 1, "seed": s, "strength": lam, "utility": u}
                         for s in range(3) for lam, u in ((0.0, 0.9 + 0.001 * s), (1.0, 0.5 + 0.001 * s))])
    claim = {"greater": {"metric": "utility", "a": {"method": "a", "strength": 0}, "b": {"method": "a", "strength": 1}}}
    assert judge(claim, runs).verdict == "held"
    assert "strength 0" in judge(claim, runs).reason


def _cheap(analogue) -> list[str]:
    """--set lines for a cheaper --quick run of ``analogue``: its attacks 5 epochs instead of 50, and 2 finetuning
    epochs where no claim counts the finetuning's messages; the pipeline, report and resume are the same
    (benchmarks/reproduce_quick.py runs every --quick budget as shipped)."""
    sets = [f"--set={key}=5" for key in analogue.quick if key in ("attack.options.epochs", "attack.prior_epochs")]
    return sets + ([] if any("equals" in claim for claim in analogue.claims) else ["--set=finetune.epochs=2"])


@pytest.mark.parametrize("name", reproductions.names())
def test_every_analogue_runs_quick_writes_its_claims_and_resumes(name, tmp_path, monkeypatch):
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "out"
    cheap = _cheap(reproductions.load(name))
    first = CliRunner().invoke(app, ["reproduce", name, "--quick", "--out", str(out), "--jobs", "1", *cheap])
    assert first.exit_code == 0, first.output
    text = (out / "reproduction.md").read_text()
    analogue = reproductions.load(name)
    runs = chosen(analogue, records(out / "results.sqlite", analogue.by, targets=analogue.targets))
    per_seed = caps(runs)
    for claim in analogue.claims:
        line = next(line for line in text.splitlines() if line.startswith(f"| {claim['id']}: "))
        verdict = judge(claim, runs, caps=per_seed)
        assert f"| **{verdict.verdict}** |" in line, line  # the report says what its records say
        if "not_comparable" in claim:
            assert verdict.verdict == "not comparable"
        else:
            assert verdict.verdict in ("held", "not held") and "no successful run" not in line, line
        if "equals" in claim:  # a count of the protocol's messages holds on any machine, quick or not
            assert verdict.verdict == "held", line
    page = (out / "reproduction.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and all(f"{c['id']}: " in page for c in analogue.claims)
    again = CliRunner().invoke(app, ["reproduce", name, "--quick", "--out", str(out), "--jobs", "1", *cheap])
    assert again.exit_code == 0 and "0 to run" in again.output


def test_each_part_runs_its_own_settings_and_leaves_the_analogue_unchanged():
    analogue = reproductions.load("fedhssl-table4")  # parts over a preset, each once per lr of its selection
    before = repr(analogue.grid)
    grids = analogue.grids(quick=False)
    lrs = len(analogue.select.values)
    parts = [(g["partition"]["labeled"], g["partition"]["aligned_fraction"]) for g in grids[::lrs]]
    assert parts[:2] == [(200, 0.2), (400, 0.4)] and len(grids) == len(analogue.parts) * lrs
    assert grids[1]["methods"] == analogue.grid["methods"] and grids[-1]["methods"] == ["fedhssl-simsiam"]
    assert grids[-1]["method_options"]["fedhssl-simsiam"] == {"gamma": 0.0}  # the ablation's own option
    assert grids[0]["method_options"].get("fedhssl-simsiam") is None  # left out of the parts that do not set it
    assert repr(analogue.grid) == before


def test_an_analogue_on_data_that_is_not_here_is_refused_before_training(tmp_path, monkeypatch):
    import vflpriv.data.catalog as catalog

    real = catalog.status
    monkeypatch.setattr(catalog, "status", lambda name: (False, None, "apt install r-cran-mlbench")
                        if name == "satellite" else real(name))

    def loaded(*_a, **_k):
        raise AssertionError("a dataset was loaded before the refusal")

    monkeypatch.setattr("vflpriv.runner.planning.load_dataset", loaded)  # the refusal comes first on any machine
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["reproduce", "fedhssl-table6", "--out", str(out)])
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith("error: analogue 'fedhssl-table6' needs dataset satellite") and "vflpriv datasets" in line
    assert "--set 'datasets=[{name: satellite, root: DIR}]'" in line
    assert "apt install r-cran-mlbench" in line and not out.exists()  # nothing trained, nothing written


def test_an_analogue_runs_on_files_a_user_points_to(tmp_path, monkeypatch):
    """Criteo-format rows in a folder of the user's: the analogue's grid reads them through the datasets axis."""
    import numpy as np

    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    rows = ["\t".join([str(int(rng.random() < 0.3)), *map(str, rng.integers(0, 50, 13)),
                       *(f"{v:08x}" for v in rng.integers(1, 6, 26))]) for _ in range(600)]
    (tmp_path / "criteo").mkdir()
    (tmp_path / "criteo" / "train.txt").write_text("\n".join(rows) + "\n")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["reproduce", "ssvfl-fig3", "--quick", "--out", str(out), "--jobs", "1", "--set",
                                      f"datasets=[{{name: criteo, root: {tmp_path / 'criteo'}}}]",
                                      *_cheap(reproductions.load("ssvfl-fig3"))])
    assert result.exit_code == 0, result.output
    runs = pd.read_csv(out / "results.csv")
    assert set(runs["dataset"]) == {"criteo"} and set(runs["status"]) == {"ok"}
    assert set(runs["utility_metric"]) == {"auc"}  # a CTR task: AUC, as the paper's tables


def test_a_reproduction_s_store_is_its_out_s_and_the_check_after_training_offers_no_store_option(tmp_path, monkeypatch):
    """reproduce takes no --store (``store_option`` off): its runs go to OUT/results.sqlite, which its report reads,
    and the check after training names that store with --overwrite alone, not evaluate's "--out OTHER --store STORE"
    (an option reproduce refuses)."""
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path / "cache"))
    out, store = tmp_path / "out", tmp_path / "out" / "results.sqlite"
    args = ["reproduce", "fedhssl-table6", "--quick", "--out", str(out), "--jobs", "1"]
    real = sweeping.sweep

    def meanwhile(*a, **k):  # another command writes its results.csv into --out while this one trains
        (out / "results.csv").write_text("key,method\nfeedfacefeedfacefeed,splitnn\n")
        return real(*a, **k)

    monkeypatch.setattr(sweeping, "sweep", meanwhile)
    result = CliRunner().invoke(app, args)
    monkeypatch.setattr(sweeping, "sweep", real)
    line = result.output[result.output.index("error: "):]
    one_error_line(line, f"this command's runs are kept in {store}: give --overwrite to replace them with theirs")
    assert result.exit_code == 2 and "--store" not in line and not (out / "reproduction.md").exists()
    again = CliRunner().invoke(app, [*args, "--overwrite"])
    assert again.exit_code == 0 and "2 already in the store, 0 to run" in " ".join(again.output.split()), again.output
    assert len(records(store, "partition.aligned_fraction")) == 2 and (out / "reproduction.md").is_file()
