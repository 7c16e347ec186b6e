"""The engine's guard on an auditor plugin's ``AuditRead``: the defense sums its clipped gradients over the rows the
read names, so a read that names rows out of the batch, negative ones (which index from the end), one twice (which
counts it twice), float or 2-D positions, or that is handed back at a later update (the positions of another batch)
is refused at that update with the plugin named, as a read naming a canary's row is."""

from __future__ import annotations

import pytest
import torch

from vflpriv.common.errors import ProtocolError
from vflpriv.engine.hooks import ActiveUpdate, AuditRead, CombinedHooks, DefensePoints, TrainingHooks

UPDATE = ActiveUpdate(ids=torch.tensor([10, 11, 12, 13]), logits=torch.zeros(4, 3), params=[], leaves={})
HIDDEN = torch.tensor([12, 40])


class PluginAuditor:
    """Asks for ``known`` at every update (the same read each time where ``stale``)."""

    def __init__(self, known, *, stale: bool = False, released=lambda sums: None):
        self.known, self.stale, self.released, self.last = known, stale, released, None

    def audit_update(self, update):
        if self.stale and self.last is not None:
            return self.last
        self.last = AuditRead(known=self.known, released=self.released)
        return self.last


def _hooks(auditor) -> CombinedHooks:
    return CombinedHooks(TrainingHooks(), DefensePoints(), auditor, hidden=HIDDEN)


def test_a_valid_read_passes_every_update():
    hooks = _hooks(PluginAuditor(torch.tensor([0, 1, 3])))
    for _ in range(3):
        assert hooks.audit_update(UPDATE).known.tolist() == [0, 1, 3]
    assert _hooks(PluginAuditor(torch.tensor([], dtype=torch.long))).audit_update(UPDATE) is not None


@pytest.mark.parametrize("known, problem", [
    (torch.tensor([0, 4]), "outside the batch"), (torch.tensor([-1]), "outside the batch"),
    (torch.tensor([0, 1, 1]), "twice"), (torch.tensor([0.0, 1.0]), "integer"), (torch.tensor([[0, 1]]), "1-D"),
    ([0, 1], "tensor"), (torch.tensor([True, False, False, True]), "integer")])
def test_a_read_of_impossible_rows_is_refused_naming_the_plugin(known, problem):
    with pytest.raises(ProtocolError, match=rf"auditor .*PluginAuditor.*{problem}"):
        _hooks(PluginAuditor(known)).audit_update(UPDATE)


def test_a_read_handed_back_at_a_later_update_is_refused():
    hooks = _hooks(PluginAuditor(torch.tensor([0, 1]), stale=True))
    hooks.audit_update(UPDATE)
    with pytest.raises(ProtocolError, match="PluginAuditor.*an earlier update"):
        hooks.audit_update(UPDATE)


def test_a_read_whose_released_is_not_callable_is_refused():
    with pytest.raises(ProtocolError, match="PluginAuditor.*released"):
        _hooks(PluginAuditor(torch.tensor([0]), released=None)).audit_update(UPDATE)


def test_a_read_of_a_canary_s_row_is_still_refused_naming_the_plugin():
    with pytest.raises(ProtocolError, match="PluginAuditor.*canary's row"):
        _hooks(PluginAuditor(torch.tensor([1, 2]))).audit_update(UPDATE)


def test_the_guard_keeps_no_earlier_read_alive_and_still_refuses_a_stale_one():
    """The stale-read check holds no previous read: a read (its released closure holds the update's graph and the
    candidate gradients) the auditor dropped is freed at once, and one it hands back is still refused."""
    import gc
    import weakref

    hooks = _hooks(PluginAuditor(torch.tensor([0, 1])))
    hooks.auditor.last = None  # the auditor keeps nothing either
    ref = weakref.ref(hooks.audit_update(UPDATE))
    hooks.auditor.last = None
    gc.collect()
    assert ref() is None
    stale = _hooks(PluginAuditor(torch.tensor([0, 1]), stale=True))
    stale.audit_update(UPDATE)
    gc.collect()
    with pytest.raises(ProtocolError, match="an earlier update"):
        stale.audit_update(UPDATE)


def test_a_read_of_one_row_passes():
    assert _hooks(PluginAuditor(torch.tensor([3]))).audit_update(UPDATE).known.tolist() == [3]


#: Each refusal's reason as the error states it after the plugin's name (the batch has 4 rows: positions 0..3).
REASONS = [
    (PluginAuditor(torch.tensor([0, 4])), r"its AuditRead\.known names positions outside the batch \(0\.\.3\)$"),
    (PluginAuditor(torch.tensor([0, 1, 1])), r"its AuditRead\.known names a row twice \("),
    (PluginAuditor(torch.tensor([0]), released=None), r"its AuditRead\.released is not callable$"),
    (PluginAuditor(torch.tensor([1, 2])), r"asked for the defense's clipped gradients of a canary's row, whose label"),
]


@pytest.mark.parametrize("auditor, reason", REASONS)
def test_each_refusal_states_its_reason_right_after_the_plugin_s_name(auditor, reason):
    with pytest.raises(ProtocolError, match=rf"^auditor [\w.]*PluginAuditor: {reason}"):
        _hooks(auditor).audit_update(UPDATE)


def test_a_stale_read_s_refusal_states_its_reason_right_after_the_plugin_s_name():
    hooks = _hooks(PluginAuditor(torch.tensor([0, 1]), stale=True))
    hooks.audit_update(UPDATE)
    with pytest.raises(ProtocolError, match=r"^auditor [\w.]*PluginAuditor: it handed back its AuditRead of an earlier"):
        hooks.audit_update(UPDATE)
