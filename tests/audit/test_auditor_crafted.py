"""gradient-lrt with crafted canaries (``canary_inputs: crafted``): the crafted rows put every canary's joint gradient
at the clipping bound with equal logits, the auditor guesses without the canaries' labels, it certifies nothing at
huge noise, stays below a correct claim and catches the broken mechanism, and the planner refuses what it cannot
craft for."""

from __future__ import annotations

import pytest
import torch

import vflpriv.defenses.dp_gaussian as dp_gaussian
from vflpriv.common.errors import VflprivError
from vflpriv.config.schema import RunConfig
from vflpriv.engine.hooks import DefenseChain
from vflpriv.runner.execution import run, train
from vflpriv.runner.planning import plan


def _config(defense: str = "dp-gaussian", *, canaries: int = 300, strength: float | None = None,
            inputs: str = "crafted", labels: str = "uniform", **finetune) -> RunConfig:
    options = {} if strength is not None else {"target_epsilon": 2.0}
    return RunConfig.model_validate({
        "partition": {"labeled": 400, "aux": 40, "canaries": canaries, "aligned_fraction": 0.5,
                      "canary_labels": labels},
        "model": {"hidden": 32, "out_dim": 16},
        "finetune": {"epochs": 3, "batch_size": 32, "auditor": "gradient-lrt",
                     "auditor_options": {"canary_inputs": inputs}, **finetune},
        "attack": {"name": "gc", "prior": "none"},
        "defenses": [{"name": defense, "strength": strength, "sweep": True, "options": options}]})


def test_crafted_rows_put_every_canary_s_joint_gradient_at_the_clipping_bound_with_equal_logits(monkeypatch):
    """dp-gaussian's own clipping factor min(1, C / ||v_i||) for each canary at every exchange is below 1 (its joint
    gradient reaches C before clipping, about 100 C here), and the canaries' logits are equal (softmax uniform)."""
    scales, logits = [], []  # spied on in the chain: a patched GaussianDP is not own (final14 F5)
    joint_scale, backward = dp_gaussian.joint_scale, DefenseChain.backward

    def spy_backward(self, losses, params, leaves, ids, **kwargs):
        def spy_scale(grads, rows, *, clip):
            scale = joint_scale(grads, rows, clip=clip)
            scales.append((ids.clone(), scale.detach().clone()))
            return scale
        monkeypatch.setattr(dp_gaussian, "joint_scale", spy_scale)
        try:
            return backward(self, losses, params, leaves, ids, **kwargs)
        finally:
            monkeypatch.setattr(dp_gaussian, "joint_scale", joint_scale)

    monkeypatch.setattr(DefenseChain, "backward", spy_backward)
    p = plan(_config(canaries=100))
    lrt_update = p.auditor.audit_update
    p.auditor.audit_update = lambda update: (logits.append((update.ids, update.logits.detach())), lrt_update(update))[1]
    train(p)
    canaries = p.scenario.canaries
    at_canaries = torch.cat([s[torch.isin(ids, canaries)] for ids, s in scales])
    assert at_canaries.numel() == 3 * 100  # each canary once per epoch
    assert float(at_canaries.max()) < 0.02  # ||v_i|| > 50 C: every canary is clipped to exactly C
    spread = torch.cat([z[torch.isin(ids, canaries)] for ids, z in logits])
    assert float((spread.max(1).values - spread.min(1).values).max()) < 1e-3


@pytest.mark.parametrize("labels", ["uniform", "pair"])
def test_the_auditor_never_reads_the_canaries_labels(monkeypatch, labels):
    """The labels the runner binds it with hide the canaries' (-1); handed their true labels, or wrong ones, instead,
    it crafts, scores and trains bit for bit the same: nothing it does reads them (ten-class and pair canaries)."""
    import vflpriv.runner.execution as execution

    bind = execution.bind_auditor
    results = []
    for poison in (None, "true", "wrong"):
        def leaky_bind(auditor, defense, fed, scenario, poison=poison):
            labels = fed.active.labels.clone()
            at = scenario.canaries.to(labels.device)
            labels[at] = -1 if poison is None else labels[at] if poison == "true" else (labels[at] + 1) % fed.num_classes
            auditor.bind(defense, labels=labels, canaries=scenario.canaries, classes=fed.num_classes,
                         candidates=scenario.canary_candidates)
        monkeypatch.setattr(execution, "bind_auditor", leaky_bind)
        p = plan(_config(canaries=100, labels=labels))
        trained = train(p).trained
        results.append((p.auditor.scores.clone(), [t.clone() for t in trained.top.state_dict().values()]))
    monkeypatch.setattr(execution, "bind_auditor", bind)
    (scores, top), *others = results
    for other_scores, other_top in others:
        assert torch.equal(scores, other_scores)
        assert all(torch.equal(a, b) for a, b in zip(top, other_top))


def test_crafted_canaries_certify_nothing_at_huge_noise():
    (quiet,) = run(_config(canaries=100, strength=1e4))
    assert quiet.status == "ok" and quiet.auditor_epsilon_lower < 0.2


def test_crafted_canaries_stay_below_a_correct_claim_and_catch_the_broken_mechanism(tenfold_too_little_noise):
    """Claim 2 (3 epochs, 300 canaries): below it when the mechanism is right, above it with 10x too little noise."""
    (right,) = run(_config())
    with tenfold_too_little_noise():  # its noise 10x smaller than its accountant assumes
        (broken,) = run(_config())
    assert right.epsilon == broken.epsilon == pytest.approx(2.0, rel=0.01)
    assert right.auditor_epsilon_lower <= right.epsilon < broken.auditor_epsilon_lower


@pytest.mark.parametrize(("change", "match"), [
    ({"finetune": {"top": "mlp"}}, "Linear top"),
    ({"model": {"out_dim": 8}}, "wider than the 10 classes"),
    ({"finetune": {"auditor": None}}, "auditor_options is set but finetune.auditor is not"),
    ({"finetune": {"auditor_options": {"canary_inputs": "forged"}}}, "natural.*crafted"),
])
def test_the_planner_refuses_what_crafted_canaries_cannot_audit(change, match):
    data = _config().model_dump()
    for section, values in change.items():
        data[section].update(values)
    with pytest.raises(VflprivError, match=match):
        plan(RunConfig.model_validate(data))


def test_the_audit_hands_its_auditor_options_to_the_audited_trainings_only():
    """audit.auditor_options reach the dp-gaussian trainings the auditor is attached to, and no other training (where
    the planner would refuse options without an auditor)."""
    from vflpriv.workflows.audit import AuditConfig, audit_grid

    small = {"model": {"hidden": 32, "out_dim": 16}, "finetune": {"epochs": 2, "batch_size": 32},
             "partition": {"labeled": 60, "aux": 20}, "method": {"name": "splitnn"}, "seeds": [0]}
    audit = {"attacks": ["gc"], "defenses": [{"name": "dp-gaussian"}, {"name": "iso"}],
             "auditor_options": {"canary_inputs": "crafted"}}
    runs, _ = audit_grid(AuditConfig.model_validate({**small, "audit": audit}))
    options = {(r.swept.name if r.swept else "none", r.partition.canaries > 0): r.finetune.auditor_options
               for r in runs}
    assert options == {("dp-gaussian", True): {"canary_inputs": "crafted"}, ("iso", True): {}, ("none", True): {},
                       ("none", False): {}}
