"""gradient-lrt subtracts the known samples' part of each release as dp-gaussian hands it (``AuditRead``: the
defense's clipped per-sample gradients summed over the rows the auditor knows): that sum is what the auditor would
compute itself, and never holds a canary's row."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import vflpriv.auditors.gradient_lrt as gradient_lrt
from vflpriv.config.schema import RunConfig
from vflpriv.defenses.dp_gaussian import joint_scale, per_sample_gradients
from vflpriv.runner.execution import train
from vflpriv.runner.planning import plan


def _config(local_updates: int) -> RunConfig:
    return RunConfig.model_validate({
        "partition": {"labeled": 200, "aux": 40, "canaries": 60, "aligned_fraction": 0.5},
        "model": {"hidden": 32, "out_dim": 16},
        "finetune": {"epochs": 2, "batch_size": 32, "auditor": "gradient-lrt", "local_updates": local_updates},
        "attack": {"name": "gc", "prior": "none"},
        "defenses": [{"name": "dp-gaussian", "strength": 2.0, "sweep": True}]})


@pytest.mark.parametrize("local_updates", [1, 2])
def test_the_known_rows_sum_the_defense_hands_the_auditor_is_theirs_alone(monkeypatch, local_updates):
    """At every update with a canary (exchanges, and FedBCD's local updates, which send no rows), the sum the auditor
    receives equals the known rows' clipped gradients recomputed from their labels, to float rounding."""
    audit_update, checked = gradient_lrt.GradientLRT.audit_update, []

    def spy(self, update):
        read = audit_update(self, update)
        if read is None:
            return None
        known = read.known
        assert not bool((self.canary[update.ids[known]] >= 0).any())  # never a canary's row
        losses = nn.functional.cross_entropy(update.logits[known], self.labels[update.ids[known]], reduction="none")
        grads, rows = per_sample_gradients(losses, update.params, update.leaves, owners=known, retain=True)
        scale = joint_scale(grads, rows, clip=self.defense.options.clip)
        expected = [None if g is None else (g.flatten(1) * scale[:, None]).sum(0) for g in grads]

        def released(sums):
            for got, want in zip(sums, expected, strict=True):
                assert (got is None) == (want is None)
                if got is not None:
                    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
            checked.append(known.numel())
            read.released(sums)

        return gradient_lrt.AuditRead(known, released)

    monkeypatch.setattr(gradient_lrt.GradientLRT, "audit_update", spy)
    train(plan(_config(local_updates)))
    assert len(checked) >= 2 * 5 * local_updates - 2 and sum(checked) > 0  # nearly every update holds a canary


def test_an_auditor_that_asks_for_a_canary_s_row_is_refused_by_the_engine():
    """The defense computes the asked rows' gradients from their true labels: an auditor asking for a canary's row
    would read the label it is to infer (a plugin did: 19 of 19 canaries at sigma 1000). The engine refuses it."""
    from vflpriv.common.errors import ProtocolError
    from vflpriv.engine.hooks import ActiveUpdate, AuditRead, CombinedHooks, DefensePoints, TrainingHooks

    class Asking:
        def __init__(self, positions):
            self.positions = torch.tensor(positions)

        def audit_update(self, update):
            return AuditRead(known=self.positions, released=lambda sums: None)

    update = ActiveUpdate(ids=torch.tensor([10, 11, 12, 13]), logits=torch.zeros(4, 3), params=[], leaves={})
    hidden = torch.tensor([12, 40])
    assert CombinedHooks(TrainingHooks(), DefensePoints(), Asking([0, 1, 3]), hidden=hidden).audit_update(update)
    with pytest.raises(ProtocolError, match="canary"):
        CombinedHooks(TrainingHooks(), DefensePoints(), Asking([1, 2]), hidden=hidden).audit_update(update)


def test_a_plugin_defense_whose_backward_takes_no_known_still_runs_where_no_auditor_asks():
    """``known`` is passed only where an auditor asks: a plugin's ``backward`` written before it keeps working."""
    from vflpriv.engine.hooks import DefenseChain

    class WrittenBefore:
        calls = 0

        def backpropagates(self):
            return True

        def backward(self, losses, params, leaves, ids):
            WrittenBefore.calls += 1

    DefenseChain([WrittenBefore()]).backward(torch.ones(2), [], {}, torch.arange(2))
    assert WrittenBefore.calls == 1


def test_a_plugin_auditor_asking_for_a_canary_s_row_stops_its_run():
    """The runner hands the engine the canaries' ids (``hidden``): without them the check above never fires in a run."""
    from vflpriv.config.registry import AUDITORS
    from vflpriv.engine.hooks import AuditRead
    from vflpriv.runner.execution import run

    class Leaky(gradient_lrt.GradientLRT):
        def audit_update(self, update):
            read = super().audit_update(update)
            if read is None:
                return None
            return AuditRead(known=torch.arange(update.ids.numel(), device=update.ids.device), released=read.released)

    from vflpriv.common.errors import ProtocolError

    AUDITORS.register("leaky-test", Leaky)
    try:
        config = _config(1).model_copy(deep=True)
        config.finetune.auditor = "leaky-test"
        with pytest.raises(ProtocolError, match="canary's row"):
            run(config)
    finally:
        AUDITORS._extra.pop("leaky-test")
