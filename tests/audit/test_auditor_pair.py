"""Pair canaries (``partition.canary_labels: pair``) and gradient-lrt's two-candidate crafted rows: each canary's two
candidate gradients are antipodal at the clipping bound, every bound uses C = 2 (chance accuracy certifies nothing),
the f-DP bounds hold a correct claim and reject a broken one, and a bad value is one ``error:`` line. That the
auditor never reads the pair canaries' labels is ``test_auditor_crafted.py``'s test, run with pairs too."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

import vflpriv.auditors.gradient_lrt as gradient_lrt
from vflpriv.cli import app
from vflpriv.config.schema import RunConfig
from vflpriv.runner.execution import run, train
from vflpriv.runner.planning import plan


def _config(defense: str = "dp-gaussian", *, canaries: int = 300, strength: float | None = None,
            inputs: str = "crafted") -> RunConfig:
    options = {} if strength is not None else {"target_epsilon": 2.0}
    return RunConfig.model_validate({
        "partition": {"labeled": 400, "aux": 40, "canaries": canaries, "aligned_fraction": 0.5,
                      "canary_labels": "pair"},
        "model": {"hidden": 32, "out_dim": 16},
        "finetune": {"epochs": 3, "batch_size": 32, "auditor": "gradient-lrt",
                     "auditor_options": {"canary_inputs": inputs}},
        "attack": {"name": "gc", "prior": "none"},
        "defenses": [{"name": defense, "strength": strength, "sweep": True, "options": options}]})


def test_pair_canaries_draw_their_label_from_their_public_pair():
    p = plan(_config(canaries=100))
    pairs, labels = p.scenario.canary_pairs, p.scenario.canary_labels
    assert pairs.shape == (100, 2) and bool((pairs[:, 0] != pairs[:, 1]).all())
    assert bool(((labels == pairs[:, 0]) | (labels == pairs[:, 1])).all())
    assert 20 < int((labels == pairs[:, 0]).sum()) < 80  # the bit is drawn, not the pair's first class


def test_two_candidate_crafted_rows_give_antipodal_clipped_gradients_of_norm_c(monkeypatch):
    """The auditor's per-canary candidates (what dp-gaussian computes for each label of the pair: the joint gradient
    of parameters and sent row, clipped to C = 1) satisfy v(a) = -v(b) and ||v|| = C at every exchange."""
    seen, counts = [], []
    joint_scale, audit_update = gradient_lrt.joint_scale, gradient_lrt.GradientLRT.audit_update

    def spy_scale(grads, rows, *, clip):
        scale = joint_scale(grads, rows, clip=clip)
        parts = [g.flatten(1) for g in grads if g is not None] + list(rows.values())
        seen.append((torch.cat(parts, dim=1) * scale[:, None]).detach())
        return scale

    def spy_update(self, update):
        counts.append(int((self.canary[update.ids] >= 0).sum()))
        return audit_update(self, update)

    monkeypatch.setattr(gradient_lrt, "joint_scale", spy_scale)
    monkeypatch.setattr(gradient_lrt.GradientLRT, "audit_update", spy_update)
    train(plan(_config(canaries=100)))
    joint = torch.cat([v[v.shape[0] - 2 * k:].view(k, 2, -1) for v, k in zip(seen, [c for c in counts if c])])
    assert joint.shape[0] == 3 * 100  # each canary once per epoch
    torch.testing.assert_close(joint.norm(dim=-1), torch.ones(300, 2), atol=1e-4, rtol=0)
    assert float((joint[:, 0] + joint[:, 1]).norm(dim=-1).max()) < 1e-4  # antipodal: 2C apart


def test_at_huge_noise_pair_canaries_are_guessed_at_chance_and_certify_nothing():
    """Half its guesses right is chance for a pair: every bound (Steinke's at C = 2, the f-DP ones) is about 0; scored
    as ten-class canaries the same guesses would certify about 2 (measured 1.96)."""
    (quiet,) = run(_config(strength=1e4))
    assert quiet.status == "ok" and quiet.canary_classes == 2
    assert 0.35 < quiet.auditor_accuracy < 0.65
    assert quiet.auditor_epsilon_lower < 0.2 and quiet.auditor_epsilon_fdp < 0.2 and quiet.auditor_mu_lower < 0.1


def test_the_audit_report_s_auditor_line_names_the_options_and_the_game_it_ran_with():
    """audit.md's auditor line says which canaries the bound rests on (crafted, pair) and gives the f-DP bounds, the
    GDP epsilon labelled as an estimate."""
    import pandas as pd

    from vflpriv.reports.canaries import canary_summary

    (record,) = run(_config(strength=1e4, canaries=60))
    (audited,) = canary_summary(pd.DataFrame([record.to_dict()]))["auditor"]
    assert "auditor gradient-lrt (canary_inputs: crafted; canary_labels: pair; white box" in audited["line"]
    assert "f-DP one run: epsilon >= " in audited["line"] and "(an estimate, not a bound)" in audited["line"]


def test_the_f_dp_bounds_hold_a_correct_claim_and_reject_a_broken_one(tenfold_too_little_noise):
    """Claim 2 (3 epochs, 300 pair canaries): the f-DP epsilon bound stays below the claim and the mu bound below
    dp-gaussian's exact GDP mu = 2 sqrt(3) / sigma; with 10x too little noise both exceed them."""
    (right,) = run(_config())
    with tenfold_too_little_noise():  # its noise 10x smaller than its accountant assumes
        (broken,) = run(_config())
    mu = 2 * 3 ** 0.5 / right.strength
    assert right.epsilon == broken.epsilon == pytest.approx(2.0, rel=0.01)
    assert right.auditor_epsilon_fdp <= right.epsilon < broken.auditor_epsilon_fdp
    assert right.auditor_mu_lower <= mu < broken.auditor_mu_lower


def test_an_unknown_canary_labels_value_is_one_error_line(tmp_path):
    result = CliRunner().invoke(app, ["evaluate", "--set", "partition.canary_labels=triple", "--set",
                                      "partition.canaries=10", "--out", str(tmp_path / "out")])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith("error: ") and "partition.canary_labels" in lines[0]
    assert "'uniform'" in lines[0] and "'pair'" in lines[0] and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_a_claim_beyond_steinke_s_peak_is_testable_by_the_f_dp_cap_and_one_beyond_every_count_is_said_so(monkeypatch):
    """Binary canaries at delta 1e-5: Steinke et al.'s delta term grows with the canaries, so their cap peaks (about
    6.8) below a claim of 7.99, but the f-DP one-run bound, the test at delta > 0, has no such term and reaches it:
    the report names the fewest canaries whose cap exceeds it. Past the counts considered, the line says so at once,
    with the closed-form cap that bounds every count up to there, instead of raising (it did, on the pair record's
    claim 8, after a minute of doubling to a million canaries)."""
    from vflpriv.common import canary_bound
    from vflpriv.common.empirical_epsilon import cap as steinke_cap
    from vflpriv.reports.canaries import _claim

    row = {"epsilon_claimed": 7.99, "epsilon_claimed_delta": 1e-5, "testable": False, "classes": 2,
           "planned_attacks": 1, "canaries": 990, "seeds": 1, "cap": 5.36, "cap_at_claim": 5.36}
    needed = canary_bound.canaries_needed(7.99, classes=2, delta=1e-5)
    assert f"a claim of 7.99 needs {needed} canaries pooled over the seeds" in _claim(row)
    assert canary_bound.testable(7.99, canary_bound.cap(canaries=needed, classes=2, delta=1e-5))
    assert not canary_bound.testable(7.99, canary_bound.cap(canaries=needed - 1, classes=2, delta=1e-5))
    assert max(steinke_cap(canaries=m, classes=2, delta=1e-5, attacks=2) for m in (needed // 4, needed)) < 7.0
    monkeypatch.setattr(canary_bound, "MAX_CANARIES", 1024)
    canary_bound.canaries_needed.cache_clear()
    assert "no count of canaries up to 1024 can test a claim of 7.99 (their cap is at most" in _claim(row)
    canary_bound.canaries_needed.cache_clear()


def test_an_auditor_line_of_ten_class_canaries_beside_pair_ones_gives_no_f_dp_bounds():
    """In a table with pair and ten-class settings the ten-class rows hold NaN for the f-DP columns: their line must
    not print them ("epsilon >= nan")."""
    from vflpriv.reports.canaries import _auditor_line

    row = {"defense": "dp-gaussian", "axis": "sigma", "strength": 1.0, "phase": "finetune", "auditor": "gradient-lrt",
           "epsilon_lower": 0.1, "delta": 1e-5, "canaries": 30, "seeds": 1, "canary_guesses": 30,
           "canary_accuracy": 0.2, "mu_lower": float("nan"), "epsilon_fdp": float("nan"),
           "epsilon_gdp_estimate": float("nan")}
    assert "f-DP" not in _auditor_line(row)
    assert "f-DP one run: epsilon >= 0.30" in _auditor_line(row | {"mu_lower": 0.2, "epsilon_fdp": 0.3,
                                                                    "epsilon_gdp_estimate": 0.4})


def test_an_auditor_line_says_its_accuracy_is_the_selected_menu_entry_s():
    """The auditor's accuracy is that of the menu entry its bound was selected from (after scoring, so optimistic):
    the line says so, not "12 guessed" as if the auditor had abstained on the rest by itself."""
    from vflpriv.reports.canaries import _auditor_line

    row = {"defense": "dp-gaussian", "axis": "sigma", "strength": 1.0, "phase": "finetune", "auditor": "gradient-lrt",
           "epsilon_lower": 0.1, "delta": 1e-5, "canaries": 100, "seeds": 2, "canary_guesses": 12,
           "canary_accuracy": 0.417}
    assert "(the menu entry selected for it: its 12 most confident guesses, accuracy 0.417)" in _auditor_line(row)
