"""A plugin defense at a passive party's points that does not subclass PassiveDefense (duck-typed: hook points and the
hook method only) is planned with PassiveDefense's defaults (finetuning, no victim it refuses), not an AttributeError."""

from __future__ import annotations

from vflpriv.config.registry import DEFENSES
from vflpriv.defenses.base import Protection, StrengthAxis
from vflpriv.engine import PASSIVE_LOSS
from vflpriv.runner.planning import plan


class _DuckPassive(Protection):
    hook_points = frozenset({PASSIVE_LOSS})
    axis = StrengthAxis(name="lambda", stronger="higher", identity=0.0, low=0.0, high=10.0)
    default_kinds = supported_kinds = ()

    def protects(self, message):
        return False

    def passive_loss(self, party, phase, x, sent):
        return None


def test_a_duck_typed_passive_defense_is_planned(tiny):
    DEFENSES.register("test-duck-passive", _DuckPassive)
    try:
        p = plan(tiny(defenses=[{"name": "test-duck-passive", "strength": 1.0}]))
    finally:
        DEFENSES._extra.pop("test-duck-passive")
    (defense,) = p.defenses
    assert isinstance(defense, _DuckPassive) and PASSIVE_LOSS in defense.called
