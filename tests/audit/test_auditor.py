"""The likelihood-ratio auditor of dp-gaussian (vflpriv.auditors.gradient_lrt): its statistic by hand on a tiny
federation, its bound below a correct claim and above a broken mechanism's, the planner's refusals, and its records kept
apart from the attacks' (never in their worst case)."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
from torch import nn

from vflpriv.common.errors import IncompatibleError, UnknownNameError
from vflpriv.attacks.labels.gradient_clustering import GradientClustering
from vflpriv.config.registry import ATTACKS
from vflpriv.config.schema import RunConfig
from vflpriv.runner.execution import build_federation, run
from vflpriv.runner.planning import plan
from vflpriv.tradeoff.auditing import auditor_table
from vflpriv.tradeoff.epsilon import epsilon_table


def _config(defense: str = "dp-gaussian", *, auditor: str | None = "gradient-lrt", canaries: int = 300,
            **options) -> RunConfig:
    return RunConfig.model_validate({
        "partition": {"labeled": 400, "aux": 40, "canaries": canaries, "aligned_fraction": 0.5},
        "model": {"hidden": 32, "out_dim": 16}, "finetune": {"epochs": 3, "batch_size": 32, "auditor": auditor},
        "attack": {"name": "gc", "prior": "none"},
        "defenses": [{"name": defense, "sweep": True, "options": options or {"target_epsilon": 2.0}}]})


def _per_sample(logits_of, params, leaf, i: int, label: int, clip: float):
    """By hand, one loss at a time: sample i's clipped (parameter part, row) under ``label``."""
    loss = nn.functional.cross_entropy(logits_of()[i:i + 1], torch.tensor([label]))
    grads = torch.autograd.grad(loss, [*params, leaf], allow_unused=True)
    u = torch.cat([g.flatten() for g in grads[:-1] if g is not None])
    r = grads[-1][i]
    scale = min(1.0, clip / float(torch.cat([u, r]).norm()))
    return scale * u, scale * r


@pytest.mark.parametrize("sigma", [3.0, 1.0])  # the noise sigma C above 1 and below it
def test_the_statistic_is_the_gaussian_log_likelihood_of_the_released_update_and_rows_by_hand(sigma):
    """One exchange of the shared loop: per canary and candidate, (<U - known - other canaries' mean, u(c)> +
    <R_i, r(c)> - ||v(c)||^2 / 2) / (sigma C)^2, U and R_i the released update and row times the batch size."""
    from vflpriv.methods.finetune import split_model, split_step

    cfg = RunConfig.model_validate({
        "partition": {"labeled": 60, "aux": 20, "canaries": 30}, "model": {"hidden": 6, "out_dim": 3},
        "finetune": {"epochs": 1, "batch_size": 12, "auditor": "gradient-lrt"}, "attack": {"name": "gc", "prior": "none"},
        "defenses": [{"name": "dp-gaussian", "strength": sigma, "sweep": True, "options": {"clip": 0.5}}]})
    p = plan(cfg)
    fed = build_federation(p)
    auditor, clip = p.auditor, 0.5
    bottoms, top = split_model(fed, p.method.fresh_bottoms(fed))
    batch = fed.labeled_aligned()[:12]
    canary = torch.isin(batch, p.scenario.canaries)
    assert 2 <= int(canary.sum()) < 12  # canaries and known samples in one batch
    split_step(fed, bottoms, top, batch, fed.active.labels[batch], epoch=0)
    params = [q for m in (bottoms[0], top) for q in m.parameters()]
    released = torch.cat([q.grad.flatten() for q in params]) * 12
    (message,) = fed.channel.inbox.select("gradient", "finetune")  # the noisy rows the passive party received
    rows = message.payload * 12
    leaf = bottoms[1](fed.parties[1].x_train[batch]).detach().requires_grad_()

    def logits_of():
        return top([bottoms[0](fed.active.x_train[batch]), leaf])

    labels = fed.active.labels[batch]
    known = sum(_per_sample(logits_of, params, leaf, i, int(labels[i]), clip)[0] for i in (~canary).nonzero().flatten())
    candidates = {int(i): [_per_sample(logits_of, params, leaf, int(i), c, clip) for c in range(10)]
                  for i in canary.nonzero().flatten()}
    means = {i: sum(u for u, _ in v) / 10 for i, v in candidates.items()}
    for i, cands in candidates.items():
        others = sum(m for j, m in means.items() if j != i)
        expected = torch.tensor([(float((released - known - others) @ u) + float(rows[i] @ r)
                                  - float(u @ u + r @ r) / 2) / (sigma * clip) ** 2 for u, r in cands])
        index = int(torch.searchsorted(p.scenario.canaries, batch[i]))
        assert torch.allclose(auditor.scores[index].float(), expected, rtol=1e-4, atol=1e-4)


def test_the_auditor_stays_below_a_correct_claim_and_exceeds_a_broken_mechanism_s(tenfold_too_little_noise):
    """dp-gaussian at epsilon 2 (3 epochs, 300 canaries): the auditor certifies less than 2; the same mechanism with
    10x less noise than its accountant assumes, the same claim, is caught: the bound exceeds 2, far above the
    correct one's, while the attacks certify nothing against either."""
    (right,) = run(_config())
    with tenfold_too_little_noise():  # its noise 10x smaller than its accountant assumes
        (broken,) = run(_config())
    assert right.epsilon == broken.epsilon == pytest.approx(2.0, rel=0.01)
    assert right.auditor == broken.auditor == "gradient-lrt"
    assert right.auditor_epsilon_lower <= right.epsilon
    assert broken.auditor_epsilon_lower > broken.epsilon > right.auditor_epsilon_lower
    assert broken.auditor_accuracy > 0.8 and right.auditor_accuracy < 0.5
    assert right.attack == "gc" and right.epsilon_lower < broken.auditor_epsilon_lower  # the attack's own bound
    # the k-candidate f-DP bound (ten classes) sits beside Steinke et al.'s, on the same side of each claim
    assert right.canary_classes == 10 and right.auditor_epsilon_fdp <= right.epsilon < broken.auditor_epsilon_fdp
    assert 0 <= right.auditor_mu_lower < broken.auditor_mu_lower and math.isfinite(right.auditor_epsilon_gdp_estimate)


def test_the_auditor_changes_nothing_the_training_computes():
    """It reads the graph and the releases and draws nothing: every trained parameter is the same, bit for bit, with
    and without it."""
    from vflpriv.runner.execution import train

    plain, audited = (train(plan(_config(auditor=a, canaries=100))).trained for a in (None, "gradient-lrt"))
    for a, b in zip([*plain.bottoms, plain.top], [*audited.bottoms, audited.top]):
        assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


def test_huge_noise_certifies_nothing():
    data = _config(canaries=100).model_dump()
    data["defenses"] = [{"name": "dp-gaussian", "strength": 1e4, "sweep": True}]
    (quiet,) = run(RunConfig.model_validate(data))
    assert quiet.status == "ok" and quiet.auditor_epsilon_lower == 0.0


@pytest.mark.parametrize(("change", "match"), [
    ({"canaries": 0}, "set partition.canaries"),
    ({"defense": "iso", "options": {}}, "audits dp-gaussian"),
    ({"strength": 0.0}, "identity strength"),
])
def test_the_planner_refuses_an_auditor_with_nothing_to_audit(change, match):
    data = _config().model_dump()
    data["partition"]["canaries"] = change.get("canaries", 300)
    if "defense" in change:
        data["defenses"] = [{"name": change["defense"], "strength": 1.0, "sweep": True}]
    if "strength" in change:
        data["defenses"] = [{"name": "dp-gaussian", "strength": change["strength"], "sweep": True}]
    with pytest.raises(IncompatibleError, match=match):
        plan(RunConfig.model_validate(data))


def test_an_unknown_auditor_names_the_valid_ones():
    with pytest.raises(UnknownNameError, match="valid auditors: gradient-lrt"):
        plan(_config(auditor="nasr"))


def _record(seed: int, training: str, counts: str, *, attack: str = "gc", auditor: str = "gradient-lrt") -> dict:
    return dict(method="m", dataset="d", defense="dp-gaussian", phase="finetune", strength=4.0, attack=attack, seed=seed,
                status="ok", canaries=100, num_classes=10, epsilon=2.0, epsilon_delta=1e-5, epsilon_lower_delta=1e-5,
                strength_axis="sigma", strength_stronger="higher", training_key=training, canary_counts="[[100, 12]]",
                auditor=auditor, auditor_counts=counts)


def test_the_auditor_is_pooled_once_per_training_and_never_enters_the_attacks_worst_case():
    """Two attacks on each of two trainings: the auditor's counts are summed over the trainings (not the records),
    and the attacks' table, worst case included, is the same with or without the auditor's far larger bound."""
    strong = "[[100, 90], [50, 50]]"
    frame = pd.DataFrame([_record(s, f"t{s}", strong, attack=a) for s in (0, 1) for a in ("gc", "mc")])
    (row,) = auditor_table(frame).to_dict("records")
    from vflpriv.common.empirical_epsilon import menu_lower
    from vflpriv.common.fdp_one_run import fdp_bounds

    assert row["canaries"] == 200 and row["seeds"] == 2
    assert row["epsilon_lower"] == menu_lower([[200, 180], [100, 100]], canaries=200, classes=10, delta=1e-5)[0]
    assert row["epsilon_lower"] > 2.0
    fdp = fdp_bounds([[200, 180], [100, 100]], canaries=200, classes=10, delta=1e-5)  # ten classes: the f-DP bounds
    assert (row["epsilon_fdp"], row["mu_lower"], row["epsilon_gdp_estimate"]) == tuple(fdp) and fdp.epsilon > 2.0
    without = frame.assign(auditor="", auditor_counts="")
    assert epsilon_table(frame).equals(epsilon_table(without))
    assert auditor_table(without).empty and math.isfinite(row["epsilon_claimed"])


def test_a_seed_s_second_training_with_the_same_canaries_is_never_pooled_again():
    """mc-active's own federation (or another adversary's) plants the seed's canaries with the same labels: its
    guesses are not independent of the shared training's, so the auditor pools one training per seed, the one the
    passive attacks share (it pooled 150 canaries from 75 at the weakest dp-gaussian strength)."""
    shared = [_record(s, f"t{s}", "[[100, 60], [50, 40]]", attack=a) for s in (0, 1) for a in ("gc", "mc")]
    acting = [_record(s, f"own{s}", "[[100, 90], [50, 50]]", attack="mc-active") for s in (0, 1)]
    (row,) = auditor_table(pd.DataFrame(acting + shared)).to_dict("records")
    from vflpriv.common.empirical_epsilon import menu_lower

    assert row["canaries"] == 200 and row["seeds"] == 2
    assert row["epsilon_lower"] == menu_lower([[200, 120], [100, 80]], canaries=200, classes=10, delta=1e-5)[0]


def test_the_audit_attaches_the_auditor_to_each_dp_gaussian_training_with_canaries_and_nowhere_else():
    from vflpriv.workflows.audit import AuditConfig, audit_grid

    small = {"model": {"hidden": 32, "out_dim": 16}, "finetune": {"epochs": 2, "batch_size": 32},
             "partition": {"labeled": 60, "aux": 20}, "method": {"name": "splitnn"}, "seeds": [0]}
    audit = {"attacks": ["gc"], "defenses": [{"name": "dp-gaussian"}, {"name": "iso"}]}
    runs, _ = audit_grid(AuditConfig.model_validate({**small, "audit": audit}))
    audited = {(r.swept.name if r.swept else "none", r.partition.canaries > 0): r.finetune.auditor for r in runs}
    assert audited == {("dp-gaussian", True): "gradient-lrt", ("iso", True): None, ("none", True): None,
                       ("none", False): None}
    # an acting attack's own federation carries the auditor too, so the defense stays one variant in the tables; the
    # auditor's table pools one training per seed (test_a_seed_s_second_training_with_the_same_canaries_is_never_...)
    acting = {"attacks": ["gc", "mc-active"], "defenses": [{"name": "dp-gaussian"}]}
    runs, _ = audit_grid(AuditConfig.model_validate({**small, "audit": acting}))
    assert {(r.attack.name, r.finetune.auditor) for r in runs if r.swept} == {("gc", "gradient-lrt"),
                                                                             ("mc-active", "gradient-lrt")}
    for off in ({"auditor": "none"}, {"canaries": 0}):
        runs, _ = audit_grid(AuditConfig.model_validate({**small, "audit": {**audit, **off}}))
        assert {r.finetune.auditor for r in runs} == {None}


def test_the_canary_report_says_the_auditor_s_bound_as_the_auditor_s_apart_from_the_attacks():
    from vflpriv.reports.canaries import canary_markdown, canary_summary

    frame = pd.DataFrame([{**_record(s, f"t{s}", "[[100, 90], [50, 50]]"), "utility": 0.5, "canary_guesses": 100}
                          for s in (0, 1)])
    summary = canary_summary(frame)
    (line,) = [r["line"] for r in summary["auditor"]]
    assert "auditor gradient-lrt (white box, not an attack)" in line
    assert "claim rejected at the 95% level (Holm over the report's 2 claim tests, the attacks' and the auditor's): 180 of " \
        "200 guesses right (f-DP's test)" in line  # at delta 1e-5: the test that decided, named
    assert "f-DP one run: epsilon >= " in line and "not mu-GDP for mu < " in line  # ten classes: the k-ary bounds
    assert all("gradient-lrt" not in r["line"] for r in summary["rows"])  # the attacks' rows and worst case
    assert "### The auditor's empirical epsilon (white box, not an attack)" in "\n".join(canary_markdown(summary))


class _RefusedUnderDP(GradientClustering):
    """gc, except that it refuses any run with dp-gaussian (a plugin attack's own reason, not the auditor's)."""

    def incompatible(self, run, *, num_classes: int) -> str:
        if any(d.name == "dp-gaussian" for d in run.defenses):
            return "it refuses dp-gaussian"
        return super().incompatible(run, num_classes=num_classes)


def test_an_attack_refused_under_a_defense_leaves_the_auditor_on_the_defense_s_other_attacks(monkeypatch):
    """The first attack cannot run under dp-gaussian for a reason of its own: it is set aside with that reason, and
    the next attack's trainings still carry the auditor (they lost it to the first attack's refusal before)."""
    from vflpriv.workflows.audit import AuditConfig, audit_grid

    monkeypatch.setitem(ATTACKS._extra, "gc-no-dp", _RefusedUnderDP)
    small = {"model": {"hidden": 32, "out_dim": 16}, "finetune": {"epochs": 2, "batch_size": 32},
             "partition": {"labeled": 60, "aux": 20}, "method": {"name": "splitnn"}, "seeds": [0]}
    audit = {"attacks": ["gc-no-dp", "gc"], "defenses": [{"name": "dp-gaussian"}]}
    runs, skipped = audit_grid(AuditConfig.model_validate({**small, "audit": audit}))
    assert {(r.attack.name, r.finetune.auditor) for r in runs if r.swept} == {("gc", "gradient-lrt")}
    assert [(s.attack, s.defense) for s in skipped] == [("gc-no-dp", "dp-gaussian")]
    assert "it refuses dp-gaussian" in skipped[0].reason
