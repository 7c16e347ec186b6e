"""The audit's recipes: the quick profile keeps one seed, the strongest attack of each kind and each defense's middle
strength; the active adversary runs at each defense's weakest strength, and at the others only where it beat the
passive attacks of its kind there."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from vflpriv.cli import app
from vflpriv.config.registry import ATTACKS
from vflpriv.workflows.audit import AuditConfig, audit_grid, profile_note
from vflpriv.workflows.audit_recipes import ActiveDecision, defer_active, escalate, mark_partial

SMALL = {"model": {"hidden": 32, "out_dim": 16}, "finetune": {"epochs": 1, "batch_size": 32},
         "partition": {"labeled": 60, "aux": 20}}
TWO = [{"name": "iso"}, {"name": "label-dp"}]


def test_each_kind_of_attack_has_exactly_one_strongest():
    kinds: dict[str, list[str]] = {}
    for name in ATTACKS.names():
        cls = ATTACKS.get(name)
        assert cls.kind, f"attack {name} declares no kind"
        kinds.setdefault(cls.kind, []).extend([name] if cls.strongest_of_kind else [])
    assert kinds == {"model completion": ["mc-mixmatch"], "gradients": ["gc"], "similarity": ["similarity"],
                     "feature reconstruction": ["fi-decoder"]}


def test_quick_profile_runs_one_seed_the_strongest_attack_of_each_kind_and_each_defense_at_its_middle_strength():
    cfg = AuditConfig.model_validate({**SMALL, "method": {"name": "splitnn"}, "audit": {"profile": "quick",
                                                                                         "defenses": TWO}})
    runs, _ = audit_grid(cfg)
    assert {r.seed for r in runs} == {0}
    assert {r.attack.name for r in runs} == {"mc-mixmatch", "gc", "similarity", "fi-decoder"}
    assert {(r.swept.name, r.swept.strength) for r in runs if r.swept} == {("iso", 5.0), ("label-dp", 2.0)}
    assert not any(r.attack.tune for r in runs) and "untuned attacks" in profile_note(cfg)
    tuned = AuditConfig.model_validate({**SMALL, "method": {"name": "splitnn"}, "audit": {
        "profile": "quick", "defenses": TWO, "tune": True}})
    assert all(r.attack.tune for r in audit_grid(tuned)[0] if r.attack.name == "gc" and r.swept)
    assert "untuned" not in profile_note(tuned)
    note = profile_note(cfg)
    assert "seed 0 (the full audit's default: 0, 1, 2)" in note and "left out: bli, direction, dli, exploit, fi-inversion, grn, mc, mc-active" in note
    assert "iso 1, 25" in note and "label-dp 4, 1" in note
    full = AuditConfig.model_validate({**SMALL, "method": {"name": "splitnn"}, "audit": {"defenses": TWO}})
    assert profile_note(full) == "full" and full.seeds == [0, 1, 2]
    assert len(audit_grid(full)[0]) > 9 * len(runs)


def test_quick_profile_keeps_what_the_user_named_and_refuses_several_seeds(tmp_path):
    cfg = AuditConfig.model_validate({**SMALL, "method": {"name": "splitnn"}, "seeds": [4], "audit": {
        "profile": "quick", "attacks": ["mc"], "defenses": [{"name": "iso", "strengths": [1, 25]}]}})
    runs, _ = audit_grid(cfg)
    assert {(r.attack.name, r.seed) for r in runs} == {("mc", 4)}
    assert {r.swept.strength for r in runs if r.swept} == {1.0, 25.0}
    result = CliRunner().invoke(app, ["audit", "--method", "splitnn", "--quick", "--seeds", "0,1",
                                      "--out", str(tmp_path / "out")])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and not (tmp_path / "out").exists() and len(lines) == 1
    assert lines[0].startswith("error: ") and "the quick profile runs one seed" in lines[0]


def _grid(active: str = "weakest") -> list:
    cfg = AuditConfig.model_validate({**SMALL, "method": {"name": "splitnn"}, "seeds": [0, 1], "audit": {
        "attacks": ["mc", "mc-mixmatch", "mc-active"], "defenses": TWO, "canaries": 0, "active": active}})
    return audit_grid(cfg)[0]


def test_the_active_adversary_runs_at_each_defenses_weakest_strength_first():
    runs = _grid()
    now, deferred = defer_active(runs)
    assert sorted(map(id, now + deferred)) == sorted(map(id, runs))
    acting = {(r.swept.name, r.swept.strength) for r in now if r.attack.name == "mc-active" and r.swept}
    assert acting == {("iso", 1.0), ("label-dp", 4.0)}  # ISO: larger lambda is stronger; label DP: smaller epsilon
    assert {r.attack.name for r in deferred} == {"mc-active"} and len(deferred) == 2 * 2 * 2
    assert any(r.attack.name == "mc-active" and r.swept is None for r in now)  # its verdict, with no defense


def _records(runs, accuracy: dict[str, float]) -> pd.DataFrame:
    rows = [{"config": json.dumps(r.model_dump(mode="json")), "attack": r.attack.name, "phase": r.attack.phase,
             "defense": r.swept.name if r.swept else "none", "strength": r.swept.strength if r.swept else 0.0,
             "seed": r.seed, "status": "ok", "attack_accuracy": accuracy[r.attack.name] + 0.01 * r.seed,
             "train_seconds": 2.0, "attack_seconds": 1.0} for r in runs]
    return pd.DataFrame(rows)


@pytest.mark.parametrize(("active", "escalated"), [(0.80, set()), (0.82, set()), (0.83, {"iso", "label-dp"})])
def test_the_active_adversary_runs_at_the_other_strengths_only_where_it_beat_the_passive_attacks_of_its_kind(
        active, escalated):
    now, deferred = defer_active(_grid())
    results = _records(now, {"mc": 0.81, "mc-mixmatch": 0.79, "mc-active": active})  # mc is the stronger passive
    more, decisions = escalate(results, deferred, margin=0.015)
    assert {r.swept.name for r in more} == escalated and len(more) == 4 * len(escalated)
    assert {d.defense: (d.passive, d.escalated) for d in decisions} == {
        "iso": ("mc", bool(escalated)), "label-dp": ("mc", bool(escalated))}
    assert all(d.seconds == 3.0 and d.passive_seconds == 1.0 and d.deferred == 4 for d in decisions)
    assert ("ran at the other strengths" if escalated else "not run at the other strengths (4 runs saved)") in \
        decisions[0].line(0.015)


def test_a_sweep_the_active_adversary_ran_at_its_weakest_strength_only_has_no_cap():
    decision = ActiveDecision(1, "finetune", "mc-active", "iso", 1.0, 0.8, "mc", 0.8, False, 4, 3.0, 1.0)
    rows = [{"adversary": 1, "attack": a, "phase": "finetune", "defense": "iso", "cap": 0.2, "cap_std": 0.01,
             "cap_status": "ok", "falls_to_prior_text": "not within λ=1"} for a in ("mc-active", "mc")]
    mark_partial(rows, [decision])
    assert rows[0]["cap"] is None and rows[0]["cap_status"].startswith("not computed")
    assert rows[1]["cap"] == 0.2 and rows[1]["cap_status"] == "ok"
    mark_partial(rows[1:], [ActiveDecision(1, "finetune", "mc", "iso", 1.0, 0.9, "mc", 0.8, True, 4, 3.0, 1.0)])
    assert rows[1]["cap"] == 0.2


def test_audit_reports_which_active_runs_ran_and_why(tmp_path):
    args = ["audit", "--method", "splitnn", "--attacks", "mc,mc-active", "--defenses", "iso", "--seeds", "0",
            "--no-tune-attacks", "--canaries", "0", "--jobs", "1", "--quiet",
            "--set", "audit.attack_options={mc: {epochs: 2}, mc-active: {epochs: 1, iterations: 2}}",
            "--set", "audit.prior=aux", "--set", "audit.prior_epochs=2", "--set", "model.hidden=32",
            "--set", "model.out_dim=16", "--set", "finetune.epochs=1"]
    for active, expected in (("weakest", {0.0, 1.0}), ("every", {0.0, 1.0, 5.0, 25.0})):
        out = tmp_path / active
        never = ["--set", "audit.margin=1"]  # no accuracy beats another by more: never escalated
        result = CliRunner().invoke(app, [*args, "--out", str(out), "--set", f"audit.active={active}", *never])
        assert result.exit_code == 0, result.output
        ran = pd.read_csv(out / "results.csv")
        assert set(ran.loc[ran["attack"] == "mc-active", "strength"]) == expected
        summary = json.loads((out / "audit.json").read_text())
        assert summary["active"]["policy"] == active and "## Active adversary" in (out / "audit.md").read_text()
        assert len(summary["active"]["decisions"]) == (active == "weakest")


@pytest.mark.parametrize("returned", [(float("nan"),), (-1.0,), [0.1], (True,), "0.1"])
def test_a_plugin_s_own_audit_strengths_out_of_range_are_one_error_naming_it(returned, monkeypatch):
    """Review misc2 M2: a plugin's ``audit_strengths_for`` returning NaN was a pydantic traceback where the audit built
    its runs; numbers it may return (numpy's float64 too) pass as they are."""
    import numpy as np

    from vflpriv.common.errors import ConfigError
    from vflpriv.defenses.iso import IsotropicNoise
    from vflpriv.workflows import audit_config

    class Plugin(IsotropicNoise):
        @classmethod
        def audit_strengths_for(cls, phase, *, finetune, options):
            return returned

    monkeypatch.setattr(audit_config, "DEFENSES", type("Registry", (), {"get": staticmethod(lambda name: Plugin)}))
    cfg = AuditConfig.model_validate({**SMALL, "audit": {"defenses": [{"name": "iso"}]}})
    with pytest.raises(ConfigError, match=r"^defense 'iso': its audit_strengths_for\('finetune'\) returned .*; give"):
        cfg.audit.defenses[0].strengths_for("finetune", finetune=cfg.finetune)
    returned = (1, np.float64(0.5))
    assert cfg.audit.defenses[0].strengths_for("finetune", finetune=cfg.finetune) == returned
