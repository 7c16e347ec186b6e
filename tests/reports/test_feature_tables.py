"""Feature attacks in the tables, CSVs, console and plots: their numbers are MSEs under MSE headers (never under
"attack accuracy"), and one attack run by two adversaries (the active party and the server) is two rows, two CAPs
and two lines, each naming its adversary and victim."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from rich.console import Console

from vflpriv.reports import plots
from vflpriv.reports.leakage import leakage_rows, leakage_tables, prior_strength_tables
from vflpriv.reports.paper_tables import cap_tables, strength_tables
from vflpriv.reports.tables import strength_rows
from vflpriv.reports.tables import strength_tables as console_tables
from vflpriv.tradeoff.cap import cap_table, strength_summary

#: (adversary, attack MSE at strengths 1 and 4, prior MSE): the active party leaks, the server does not.
ADVERSARIES = {"0": ((0.02, 0.05), 0.08), "server": ((0.07, 0.09), 0.10)}


def _record(strength: float, seed: int, *, adversary: str, secret: str = "features") -> dict:
    base = {"method": "splitnn", "dataset": "digits", "defense": "iso", "phase": "finetune", "strength": strength,
            "seed": seed, "status": "ok", "utility": 0.9 - strength / 20, "utility_metric": "accuracy",
            "num_classes": 10, "strength_axis": "lambda", "strength_stronger": "higher", "strength_identity": 0.0,
            "secret": secret, "adversary": adversary}
    if secret == "labels":
        return {**base, "attack": "mc", "victim": "", "attack_accuracy": 0.6, "prior_accuracy": 0.5,
                "leakage": 0.1, "feature_mse": math.nan, "prior_mse": math.nan}
    (weak, strong), prior = ADVERSARIES[adversary]
    mse = (weak if strength == 1.0 else strong) + seed * 0.001
    return {**base, "attack": "fi-decoder", "victim": "1", "feature_mse": mse, "prior_mse": prior,
            "attack_accuracy": math.nan, "prior_accuracy": math.nan, "leakage": prior - mse,
            "attack_errors": json.dumps([mse] * 3), "prior_errors": json.dumps([prior] * 3)}


@pytest.fixture
def results() -> pd.DataFrame:
    rows = [_record(s, seed, adversary=a) for a in ADVERSARIES for s in (1.0, 4.0) for seed in (0, 1)]
    rows += [_record(s, seed, adversary="1", secret="labels") for s in (1.0, 4.0) for seed in (0, 1)]
    return pd.DataFrame(rows)


def test_strength_rows_csv_holds_each_adversary_s_mses_in_columns_of_their_own(results):
    rows = strength_rows(strength_summary(results))
    features = rows[(rows["secret"] == "features") & (rows["attack"] == "fi-decoder")].set_index(
        ["adversary", "strength"])
    assert features.loc[("0", 1.0), "attack_mse_mean"] == pytest.approx(0.0205)
    assert features.loc[("server", 1.0), "attack_mse_mean"] == pytest.approx(0.0705)
    assert features.loc[("server", 4.0), "prior_mse_mean"] == pytest.approx(0.10)
    assert features.loc[("0", 4.0), "leakage_mse_mean"] == pytest.approx(0.08 - 0.0505)
    assert features["attack_accuracy_mean"].isna().all() and features["leakage_mean"].isna().all()
    labels = rows[rows["secret"] == "labels"]
    assert labels["attack_accuracy_mean"].eq(0.6).all() and labels["attack_mse_mean"].isna().all()


def test_strength_rows_csv_gives_each_row_only_its_own_secret_s_claim(results):
    """Review misc2 M5: a feature row's epsilon_max was the training's label claim (label-dp), read as its own."""
    claimed = results.assign(epsilon=1.0, epsilon_delta=0.0, epsilon_features=41.6, epsilon_features_delta=1e-5)
    rows = strength_rows(strength_summary(claimed))
    features, labels = rows[rows["secret"] == "features"], rows[rows["secret"] == "labels"]
    label_claim = ["epsilon_max", "epsilon_delta_max", "epsilon_seeds"]
    feature_claim = ["epsilon_features_max", "epsilon_features_delta_max", "epsilon_features_seeds"]
    assert features[label_claim].isna().all().all() and labels[feature_claim].isna().all().all()
    assert features["epsilon_features_max"].eq(41.6).all() and labels["epsilon_max"].eq(1.0).all()
    assert labels["epsilon_seeds"].eq(2).all()
    plain = strength_rows(strength_summary(claimed[claimed["secret"] == "labels"]))
    assert plain["epsilon_max"].eq(1.0).all() and plain["epsilon_features_max"].isna().all()


def test_table_xi_reads_a_feature_attack_s_mse_per_adversary_under_an_mse_title(results):
    found = {t.title: t for t in strength_tables(strength_summary(results))}
    features = {title: t for title, t in found.items() if "fi-decoder" in title}
    assert len(features) == 2 and not any("attack accuracy" in title for title in features)
    (active,) = [t for title, t in features.items() if "by party 0 (the active party) on party 1's features" in title]
    (server,) = [t for title, t in features.items() if "by the server on party 1's features" in title]
    assert "attack MSE" in next(iter(features))
    assert active.rows == [["splitnn", "0.0205 / 0.850", "0.0505 / 0.700"]]
    assert server.rows == [["splitnn", "0.0705 / 0.850", "0.0905 / 0.700"]]
    assert any("attack accuracy A" in title and "attack mc" in title for title in found)


def test_feature_cap_is_one_per_adversary_and_says_its_score(results):
    caps = cap_table(results)
    fi = caps[caps["attack"] == "fi-decoder"].set_index("adversary")
    # CAP = mean over strengths of U x min(1, attack / prior MSE), mean over the two seeds
    expected = {a: sum(((0.9 - s / 20) * min(1.0, ((w if s == 1 else st) + seed * 0.001) / p)
                        for s in (1.0, 4.0) for seed in (0, 1))) / 4 for a, ((w, st), p) in ADVERSARIES.items()}
    assert fi.loc["0", "cap"] == pytest.approx(expected["0"])
    assert fi.loc["server", "cap"] == pytest.approx(expected["server"])
    titles = [t.title for t in cap_tables(caps) if "fi-decoder" in t.title]
    assert len(titles) == 2 and all("min(1, attack MSE / prior MSE)" in t for t in titles)


def test_the_console_table_of_feature_attacks_has_mse_headers_and_the_adversary(results):
    console = Console(record=True, width=250)
    for table in console_tables(strength_summary(results)):
        console.print(table)
    text = console.export_text()
    features = text[text.index("attack fi-decoder"):text.index("attack mc")]
    assert "attack MSE" in features and "prior MSE" in features and "attack acc" not in features
    assert "party 0 (the active party)" in features and "the server" in features


def test_the_plot_draws_one_line_and_one_prior_per_adversary(results, tmp_path, monkeypatch):
    shown = []
    monkeypatch.setattr(plots.plt, "close", lambda fig: shown.append(fig))
    feature_rows = strength_summary(results[results["secret"] == "features"])
    plots.tradeoff_figures(feature_rows, tmp_path, formats=("png",))
    (figure,) = shown
    _, labels = figure.axes[0].get_legend_handles_labels()
    assert {"splitnn: party 0 → party 1", "splitnn: server → party 1", "prior: party 0 → party 1",
            "prior: server → party 1"} <= set(labels)


def test_the_leakage_tables_keep_each_adversary_apart_and_read_mse(results):
    rows = leakage_rows(results)
    features = rows[rows["secret"] == "features"].set_index(["adversary", "strength"])
    assert features.loc[("0", 1.0), "leakage"] == pytest.approx(0.08 - 0.0205)
    assert features.loc[("server", 1.0), "leakage"] == pytest.approx(0.10 - 0.0705)
    labels_table, features_table = leakage_tables(rows)
    assert "attack accuracy" in labels_table.title and "attack accuracy" not in features_table.title
    assert "prior MSE - attack MSE" in features_table.title
    assert features_table.columns[3:5] == ["attack MSE", "prior MSE"]
    server = [r for r in features_table.rows if "the server on party 1" in r[0]]
    assert [r[1:6] for r in server] == [["λ=1", "0.850", "0.0705", "0.1000", "+0.0295"],
                                        ["λ=4", "0.700", "0.0905", "0.1000", "+0.0095"]]


def _undefended(adversary: str, *, leak: float) -> list[dict]:
    """Three seeds of ``adversary``'s undefended fi-decoder, its attack ``leak`` below the prior's MSE per target."""
    prior = ADVERSARIES[adversary][1]
    rows = []
    for seed in (0, 1, 2):
        attack = [prior - leak + 0.001 * i + 0.0005 * seed for i in range(8)]
        priors = [prior + 0.0002 * (i % 2) for i in range(8)]
        rows.append({**_record(1.0, seed, adversary=adversary), "defense": "none", "strength": 0.0,
                     "prior_kind": "mean", "attack_target": "train", "feature_mse": sum(attack) / 8,
                     "prior_mse": sum(priors) / 8, "attack_errors": json.dumps(attack),
                     "prior_errors": json.dumps(priors)})
    return rows


def test_the_weakest_strength_that_falls_to_the_prior_is_per_adversary(results):
    weak = (results["adversary"] == "server") & (results["strength"] == 4.0)
    results = results.assign(feature_mse=results["feature_mse"].mask(weak, 0.098),
                             leakage=results["leakage"].mask(weak, 0.002),
                             attack_errors=results["attack_errors"].mask(weak, json.dumps([0.095, 0.098, 0.101])))
    results = pd.concat([results, pd.DataFrame(_undefended("0", leak=0.06) + _undefended("server", leak=0.03))])
    (_, features) = prior_strength_tables(results)
    found = {r[features.columns.index("adversary")]: r[-1] for r in features.rows}
    # the server's leakage at λ=4 (0.002) is shown below 5% of the prior's MSE (interval [-0.0004, +0.0044] < 0.005):
    # it falls; the active party's leaks at both (review fe F2: each strength's own test decides)
    leaks = "not at the prior: λ=1 leaks beyond the prior, λ=4 leaks beyond the prior"
    assert found == {"0": leaks, "server": "λ=4 (leakage +0.0020 MSE, utility 0.700)"}


def test_the_strength_table_credits_no_defense_with_an_attack_that_did_not_leak_undefended(results):
    """Review fin F1: ``vflpriv table`` (and the report's cap_tables.md) printed "falls to the prior at λ=1" for an
    attack that read "no" without a defense, while the report's own feature table said "n/a: no leakage" (nothing
    was brought down); and a strength for a configuration that never ran undefended."""
    quiet = pd.DataFrame(_undefended("0", leak=-0.01) + _undefended("server", leak=0.03))
    (_, features) = prior_strength_tables(pd.concat([results, quiet]))
    found = {r[features.columns.index("adversary")]: r[-1] for r in features.rows}
    assert found == {"0": "n/a: no leakage beyond the prior without a defense",
                     "server": "not at the prior: λ=1 leaks beyond the prior, λ=4 leaks beyond the prior"}
    weak = (results["adversary"] == "server") & (results["strength"] == 4.0)
    results = results.assign(feature_mse=results["feature_mse"].mask(weak, 0.098),
                             attack_errors=results["attack_errors"].mask(weak, json.dumps([0.095, 0.098, 0.101])))
    (_, features) = prior_strength_tables(pd.concat([results, pd.DataFrame(_undefended("0", leak=0.03))]))
    found = {r[features.columns.index("adversary")]: r[-1] for r in features.rows}
    assert found["server"] == ("λ=4 (leakage +0.0020 MSE, utility 0.700; no undefended run of this configuration to "
                               "compare)")  # the strength, and that nothing says the attack leaked without it


def test_a_defense_s_two_configurations_are_two_feature_rows_each_with_its_cap():
    """ISO on the embeddings and on the embeddings and weights both act on what a passive adversary reads in
    FedHSSL's pretraining: the audit's feature table merged them into one row with no CAP ("n/a", 0 seeds)."""
    from vflpriv.reports.features import defense_table, feature_defenses

    rows = [{**_record(s, seed, adversary="0"), "variant": variant, "utility": utility}
            for variant, utility in (("on embedding", 0.9), ("on embedding+weights", 0.7))
            for s in (1.0, 4.0) for seed in (0, 1)]
    found = {d["variant"]: d for d in feature_defenses(pd.DataFrame(rows))}
    assert set(found) == {"on embedding", "on embedding+weights"}
    assert [found[v]["seeds"] for v in found] == [2, 2]
    assert found["on embedding"]["cap"] > found["on embedding+weights"]["cap"] > 0  # same MSEs, lower utility
    assert "iso (on embedding+weights)" in defense_table(list(found.values())).markdown()


def test_a_store_of_two_methods_gets_each_method_s_defense_rows_and_its_own_undefended_verdict():
    """leftovers2's note: the defended table pooled every method's runs into one CAP per (adversary, victim) and
    looked the undefended verdict up without method or dataset, so one method's "no" made another's row "n/a"."""
    from vflpriv.reports.features import defense_table, feature_defenses

    rows = []
    for method, utility, prior in (("splitnn", 0.9, 0.05), ("fedhssl", 0.5, 0.0)):
        for s in (1.0, 4.0):
            for seed in (0, 1):
                r = {**_record(s, seed, adversary="0"), "method": method, "utility": utility}
                rows.append({**r, "prior_mse": r["prior_mse"] + prior,
                             "prior_errors": json.dumps([r["prior_mse"] + prior] * 3)})
    verdicts = [{"place": ("splitnn", "digits"), "adversary": "0", "victim": "1", "attack": "fi-decoder",
                 "phase": "finetune", "verdict": "yes"},
                {"place": ("fedhssl", "digits"), "adversary": "0", "victim": "1", "attack": "fi-decoder",
                 "phase": "finetune", "verdict": "no"}]
    found = {d["setting"]: d for d in feature_defenses(pd.DataFrame(rows), verdicts=verdicts)
             if d["attack"] == "fi-decoder"}
    assert set(found) == {"splitnn on digits", "fedhssl on digits"}
    assert found["splitnn on digits"]["cap"] > found["fedhssl on digits"]["cap"]  # each its own utility
    assert found["fedhssl on digits"]["falls_to_prior_text"].startswith("n/a: no leakage")
    assert not found["splitnn on digits"]["falls_to_prior_text"].startswith("n/a")
    assert "splitnn on digits" in defense_table(list(found.values())).markdown()


def _configured(aux, defense: str, record: dict | None = None) -> dict:
    """A record whose stored configuration names its partition.aux_features and its defense."""
    record = record or {}
    config = {"partition": {"aux_features": aux}, "defenses": [{"name": defense}], "seed": record.get("seed", 0)}
    return {**record, "defense": defense, "config": json.dumps(config)}


@pytest.mark.parametrize(("baseline", "defended", "quiet"), [
    ((None, 5), (None, 5), {None: True, 5: False}),
    ((None, 5), (None,), {None: True}),
    ((None,), (None, 5), {None: True, 5: False}),  # aux=5 never ran undefended: nothing says it was quiet
], ids=["both sides both", "baseline both, defended unset", "baseline unset, defended both"])
def test_each_configuration_s_defense_row_reads_its_own_undefended_verdict(baseline, defended, quiet):
    """Reviews lo2 F2 and last F1: the verdict was looked up by the rows' labels, which name only what varies on each
    side, so one configuration's iso row took another's "yes" (a claim that iso brought it to the prior), or, with one
    undefended configuration, a defended configuration never run undefended read "n/a: no leakage"."""
    from vflpriv.reports.features import feature_defenses, settings

    verdict = {None: "no", 5: "yes"}
    verdicts = [{"place": ("splitnn", "digits"), "adversary": "0", "victim": "1", "attack": "fi-decoder",
                 "phase": "finetune", "verdict": verdict[aux],
                 "configurations": settings(pd.DataFrame([_configured(aux, "none")]))} for aux in baseline]
    rows = [_configured(aux, "iso", {**_record(s, seed, adversary="0"), "variant": f"aux={aux}"})
            for aux in defended for s in (1.0, 4.0) for seed in (0, 1)]
    for order in (verdicts, verdicts[::-1]):
        found = {d["variant"]: d["falls_to_prior_text"] for d in feature_defenses(pd.DataFrame(rows), verdicts=order)
                 if d["attack"] == "fi-decoder"}
        assert {v: text.startswith("n/a: no leakage") for v, text in found.items()} == \
            {f"aux={aux}": q for aux, q in quiet.items()}
        leaks = "not at the prior: λ=1 leaks beyond the prior, λ=4 leaks beyond the prior"
        assert all(found[f"aux={aux}"] == leaks for aux in quiet if aux not in baseline)


def test_settings_that_only_measure_or_were_added_later_do_not_part_a_defended_run_from_its_baseline():
    """Review final F1: a baseline resumed from a store written before finetune.validation existed, or a defended
    training the audit gave an auditor or a learning curve, no longer matched, so every quiet attack read as brought
    to the prior at the weakest strength."""
    from vflpriv.reports.features import settings

    old = {"partition": {"aux_features": None}, "defenses": [], "finetune": {"epochs": 2}}
    new = {"partition": {"aux_features": None}, "defenses": [{"name": "iso"}],
           "finetune": {"epochs": 2, "validation": 0.0, "curve": True, "auditor": "gradient-lrt"},
           "attack": {"victim": 1, "prior": "none", "prior_epochs": 3}}  # the label attacks' prior: unread (fin F3)
    frame = pd.DataFrame({"config": [json.dumps(old), json.dumps(new)]})
    assert len(settings(frame)) == 1
    frame = pd.DataFrame({"config": [json.dumps(old), json.dumps({**new, "finetune": {"epochs": 3}})]})
    assert len(settings(frame)) == 2  # a setting that trains differently still parts them
    crafted = {**new, "finetune": {**new["finetune"], "auditor_options": {"canary_inputs": "crafted"}}}
    frame = pd.DataFrame({"config": [json.dumps(old), json.dumps(crafted)]})
    assert len(settings(frame)) == 1  # the auditor's options too: no undefended run can have them (review fin2 G2)
    for damaged in ({**old, "finetune": None}, {**old, "partition": "x"}, {**old, "defenses": [3]}, [1], "x"):
        frame = pd.DataFrame({"config": [json.dumps(old), json.dumps(damaged)]})
        assert len(settings(frame)) == 2  # an edited record's config read as written, no traceback (review fin F4)


def test_a_defense_whose_every_defended_run_failed_says_so_not_an_empty_list_of_strengths():
    """Review last3 F2 (last2 R3's feature half): the row read "not within " with nothing after it."""
    from vflpriv.reports.features import feature_defenses

    rows = [{**_record(s, seed, adversary="0"), "status": "failed"} for s in (1.0, 4.0) for seed in (0, 1)]
    (found,) = [d for d in feature_defenses(pd.DataFrame(rows)) if d["attack"] == "fi-decoder"]
    assert found["falls_to_prior_text"] == "n/a: every defended run failed"
