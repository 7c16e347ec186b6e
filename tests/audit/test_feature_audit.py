"""The audit covers both secrets: the feature attacks by the active party, the server and the passive adversary on
the label attacks' trainings, under the defenses that act on what they read, reported per secret."""

from __future__ import annotations

import json

import pandas as pd

from vflpriv.reports.audit import audit_markdown, audit_summary
from vflpriv.workflows.audit import AuditConfig, audit_grid

SMALL = {"model": {"hidden": 32, "out_dim": 16}, "finetune": {"epochs": 2, "batch_size": 32},
         "partition": {"labeled": 60, "aux": 20}}


def test_feature_attacks_run_by_every_role_that_receives_something_on_the_label_attacks_trainings():
    cfg = AuditConfig.model_validate({**SMALL, "method": {"name": "splitnn"}, "seeds": [0, 1],
                                      "audit": {"attacks": ["mc", "fi-decoder", "grn"], "canaries": 0,
                                                "defenses": [{"name": "iso"}, {"name": "iso", "party": 1,
                                                                               "kinds": ["embedding"]}]}})
    runs, skipped = audit_grid(cfg)
    undefended = {(r.attack.name, r.attack.adversary, r.attack.victim) for r in runs if not r.defenses}
    assert undefended == {("mc", None, None), ("fi-decoder", 0, None), ("fi-decoder", 1, 0), ("grn", 0, None)}
    reasons = {(s.attack, s.defense): s.reason for s in skipped}
    assert "the server receives none from it" in reasons[("fi-decoder by server", "none")]
    assert "may be run by the active party" in reasons[("grn by party 1", "none")]
    defended = {(r.attack.name, r.attack.adversary, r.swept.party) for r in runs if r.defenses}
    # each feature attack under the defenses acting on what it reads (audit.feature_defended: the decoder only): the
    # passive adversary's on the active party's gradients under ISO on them, the active party's on party 1's
    # embeddings under ISO on those
    assert defended == {("mc", None, None), ("mc", None, 1), ("fi-decoder", 1, None), ("fi-decoder", 0, 1)}
    label_trainings = {r.training_key() for r in runs if r.attack.name == "mc"}
    assert {r.training_key() for r in runs} == label_trainings  # no training of their own


def test_defenses_meet_the_attacks_by_the_secret_they_claim_and_by_what_they_act_on():
    """A label attack under each defense that claims the labels; a feature attack under each that acts on what it
    reads: the victim's embeddings (nopeek at its points, ISO on them, MID inside the active party's model), or, for
    the active party's features, the gradients it sends (ISO on them); CAE touches neither."""
    defenses = [{"name": "nopeek"}, {"name": "iso"}, {"name": "iso", "kinds": ["embedding"]}, {"name": "mid"},
                {"name": "cae"}]
    cfg = AuditConfig.model_validate({**SMALL, "method": {"name": "splitnn"}, "seeds": [0],
                                      "audit": {"attacks": ["mc", "fi-decoder"], "canaries": 0, "defenses": defenses}})
    runs, _ = audit_grid(cfg)
    pairs = {(r.attack.name, r.attack.adversary, r.swept.name, tuple(r.swept.kinds or ())) for r in runs if r.defenses}
    assert pairs == {
        ("mc", None, "iso", ()), ("mc", None, "iso", ("embedding",)), ("mc", None, "mid", ()), ("mc", None, "cae", ()),
        ("fi-decoder", 0, "nopeek", ()), ("fi-decoder", 0, "iso", ("embedding",)), ("fi-decoder", 0, "mid", ()),
        ("fi-decoder", 1, "iso", ())}
    strengths = {(r.swept.name, tuple(r.swept.kinds or ())): [] for r in runs if r.defenses}
    for r in runs:
        if r.defenses and r.attack.name == "fi-decoder":
            strengths[(r.swept.name, tuple(r.swept.kinds or ()))].append(r.swept.strength)
    assert sorted(set(strengths[("iso", ("embedding",))])) == [0.3, 1.0, 3.0]  # ISO's strengths on embeddings


def test_the_default_audit_adds_the_embedding_configuration_of_a_defense_that_declares_its_strengths():
    from vflpriv.workflows.audit import default_defenses

    found = {(d.name, tuple(d.kinds or ())) for d in default_defenses()}
    assert {("iso", ()), ("iso", ("embedding",)), ("gaussian-message", ("embedding",)), ("nopeek", ()),
            ("embedding-dp", ())} <= found
    assert ("mid", ("embedding",)) not in found and ("cae", ("embedding",)) not in found


def _record(attack, adversary, victim, seed, mse, prior, defense="none", strength=0.0):
    return {"key": f"{attack}{adversary}{seed}{defense}{strength}", "training_key": f"t{seed}{defense}{strength}",
            "method": "splitnn", "dataset": "digits", "attack": attack, "defense": defense, "phase": "finetune",
            "strength": strength, "seed": seed, "status": "ok", "error": "", "utility": 0.9,
            "utility_metric": "accuracy", "secret": "features", "adversary": adversary, "victim": victim,
            "feature_mse": mse, "prior_mse": prior, "prior_mse_mean": prior + 0.01, "prior_mse_regressor": prior,
            "prior_mse_random": 0.26, "prior_kind": "regressor", "feature_psnr": float("nan"),
            "feature_ssim": float("nan"), "feature_exact_match": float("nan"), "feature_mse_oracle": mse,
            "attack_target": "test", "attack_accuracy": float("nan"), "prior_accuracy": float("nan"),
            "attack_errors": json.dumps([mse - 0.001, mse, mse + 0.001]), "prior_errors": json.dumps([prior] * 3),
            "leakage": prior - mse, "canaries": 0, "num_classes": 10, "strength_axis": "lambda",
            "strength_stronger": "higher", "strength_identity": 0.0, "traffic": "{}", "feature_ap": 1 - mse,
            "config": json.dumps({"partition": {"adversary": 1}})}


def test_the_report_says_what_leaks_per_secret_with_the_worst_case_over_the_feature_attacks():
    frame = pd.DataFrame([_record("fi-decoder", "0", "1", s, 0.03, 0.08) for s in (0, 1)]
                         + [_record("fi-inversion", "0", "1", s, 0.05, 0.08) for s in (0, 1)]
                         + [_record("fi-decoder", "1", "0", s, 0.07, 0.06) for s in (0, 1)])
    summary = audit_summary(frame, [], margin=0.02, context={"method": "splitnn", "dataset": "digits"})
    found = {(v["attack"], v["adversary"], v["victim"]): v["verdict"] for v in summary["features"]["verdicts"]}
    assert found[("fi-decoder", "0", "1")] == "yes" and found[("fi-decoder", "1", "0")] == "no"
    worst = [v for v in summary["features"]["verdicts"] if v["attack"] == "worst-case"]
    assert [w["strongest"] for w in worst] == ["fi-decoder by party 0 (the active party)"]
    text = audit_markdown(summary)
    assert "- party 1's features (finetune): yes (fi-decoder by party 0 (the active party), leakage +0.0500 MSE)" in text
    assert "- party 0's features (finetune): no" in text
    assert "## Features: what leaks of each victim's features" in text


def test_an_audit_of_feature_attacks_alone_counts_their_trainings_traffic_and_prints_no_empty_label_tables():
    """Communication was read from the label attacks' trainings only (an empty table here), the label rules and their
    empty tables were printed beside "no attack applies", and an unset option read "null"."""
    traffic = json.dumps({"finetune/up/embedding": [2048000, 80]})
    frame = pd.DataFrame([{**_record("fi-decoder", "0", "1", s, 0.03, 0.08), "traffic": traffic} for s in (0, 1)])
    options = {"method": {}, "attacks": {"fi-decoder": {"image_metrics": None, "decoder": "auto"}}}
    text = audit_markdown(audit_summary(frame, [], margin=0.02, context={"method": "splitnn", "dataset": "digits",
                                                                         "options": options}))
    assert "| finetune | up | embedding | 2.048 | 80 |" in text
    assert '- fi-decoder options: image_metrics=unset, decoder="auto"' in text  # not JSON's null
    assert "- no label attack ran" in text
    assert "Leakage = attack accuracy" not in text and "| adversary | attack | phase | attack acc |" not in text
