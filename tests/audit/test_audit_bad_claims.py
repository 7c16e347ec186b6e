"""The audit's claims from hostile settings: a DP defense's options out of range are refused in planning with one
``error:`` line naming the option (they reached the audit's canary sizing as a traceback), and a claim no count of
canaries can test plans, untestable, instead of failing the audit."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from vflpriv.cli import app
from vflpriv.workflows.audit import AuditConfig, canaries
from vflpriv.workflows.audit_config import AUTO_CANARIES, AUTO_SHARE, MAX_SHARE

BASE = ["audit", "--method", "splitnn", "--attacks", "gc", "--seeds", "0,1", "--dry-run"]


@pytest.mark.parametrize("option, value", [("target_epsilon", "-1"), ("target_epsilon", ".nan"),
                                           ("target_epsilon", ".inf"), ("target_epsilon", "0"), ("delta", "0"),
                                           ("delta", "1"), ("delta", "-1"), ("delta", ".nan")])
def test_a_dp_defense_s_bad_option_is_one_error_line_in_planning(option, value, tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [*BASE, "--out", str(out), "--set",
                                      f"audit.defenses=[{{name: dp-gaussian, options: {{{option}: {value}}}}}]"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and f"audit.defenses[0].options.{option}" in lines[0]
    assert not out.exists()


@pytest.mark.parametrize("defense", [{"name": "label-dp", "strengths": [1e9]},
                                     {"name": "dp-gaussian", "strengths": [0.01]}])
def test_a_claim_no_count_of_canaries_can_test_plans_the_default_share(defense, tmp_path):
    """As a claim that needs more than a quarter of the labels: no canary is planted for it (the default share stays:
    more would cost labels and test no claim) and the report calls the claim untestable (it failed the whole audit
    with canaries_needed's ValueError)."""
    cfg = AuditConfig.model_validate({"method": {"name": "splitnn"}, "audit": {"attacks": ["gc"],
                                                                                "defenses": [defense]}})
    assert canaries(cfg) == min(AUTO_CANARIES, cfg.partition.labeled // AUTO_SHARE) < cfg.partition.labeled // MAX_SHARE
    result = CliRunner().invoke(app, [*BASE, "--out", str(tmp_path / "out"), "--set",
                                      f"audit.defenses=[{defense}]".replace("'", "")])
    assert result.exit_code == 0, result.output


def test_a_target_epsilon_in_an_audit_is_refused_naming_the_strengths_to_give(tmp_path):
    """The audit sweeps strengths; dp-gaussian's target_epsilon sets one (the planner's "not both" named a strength
    the user never gave)."""
    result = CliRunner().invoke(app, [*BASE, "--out", str(tmp_path / "out"), "--set",
                                      "audit.defenses=[{name: dp-gaussian, options: {target_epsilon: 2}}]"])
    assert result.exit_code == 2
    assert result.output.startswith("error: audit.defenses[0].options.target_epsilon sets dp-gaussian's strength")
    assert "audit.defenses[0].strengths" in result.output


def test_canaries_given_to_an_audit_without_a_label_attack_are_refused(tmp_path):
    """No attack of a feature-only audit guesses a canary: --canaries N would cost N labels for no bound."""
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["audit", "--method", "splitnn", "--attacks", "fi-decoder", "--defenses", "none",
                                      "--canaries", "10", "--seeds", "0,1", "--dry-run", "--out", str(out)])
    assert result.exit_code == 2
    assert result.output.startswith("error: audit.canaries=10: no attack of this audit guesses a canary")
    assert not out.exists()


@pytest.mark.parametrize("defenses", [[{"name": "iso"}], [{"name": "label-dp"}], None])
def test_a_feature_only_audit_plants_no_canaries_by_default(defenses):
    """No attack of it guesses a canary: planted by default they cost labels (and a control training per seed) for no
    bound; with a label attack beside, the same audit plants them."""
    from vflpriv.workflows.audit import audit_grid

    audit = {"attacks": ["fi-decoder"], **({"defenses": defenses} if defenses is not None else {})}
    cfg = AuditConfig.model_validate({"method": {"name": "splitnn"}, "seeds": [0, 1], "audit": audit})
    assert canaries(cfg) == 0
    if defenses is not None:
        runs, _ = audit_grid(cfg)
        assert runs and all(r.partition.canaries == 0 for r in runs)
    labels = AuditConfig.model_validate({"method": {"name": "splitnn"}, "seeds": [0, 1],
                                         "audit": {**audit, "attacks": ["fi-decoder", "gc"]}})
    assert canaries(labels) > 0


def test_an_auditor_that_cannot_audit_a_training_is_listed_not_dropped_in_silence():
    """Crafted canary inputs need the Linear top: with an MLP top the auditor's trainings run without it, and the
    audit says so with the auditor's reason (it ran without a word)."""
    from vflpriv.workflows.audit import audit_grid

    cfg = AuditConfig.model_validate({"method": {"name": "splitnn"}, "finetune": {"top": "mlp"}, "seeds": [0, 1],
                                      "audit": {"attacks": ["gc"], "defenses": [{"name": "dp-gaussian"}],
                                                "auditor": "gradient-lrt",
                                                "auditor_options": {"canary_inputs": "crafted"}}})
    runs, skipped = audit_grid(cfg)
    assert runs and not any(r.finetune.auditor for r in runs)
    assert [(s.attack, s.defense) for s in skipped] == [("auditor gradient-lrt", "dp-gaussian")]
    assert "finetune.top=linear" in skipped[0].reason


def test_canaries_on_a_label_free_phase_suggest_only_phases_the_method_has(tmp_path):
    """splitnn does not pretrain: the refusal names --phases finetune, not finetune,pretrain."""
    result = CliRunner().invoke(app, ["audit", "--method", "splitnn", "--phases", "pretrain", "--attacks", "gc",
                                      "--defenses", "none", "--seeds", "0", "--canaries", "5", "--dry-run",
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "(--phases finetune)" in result.output, result.output
