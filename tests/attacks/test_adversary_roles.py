"""Who runs an attack against whom: the attack declares its secret and roles, the run names the adversary, and
the planner refuses what the attack's roles or the method's traffic do not allow (one error line each)."""

from __future__ import annotations

import pytest

from vflpriv.common.errors import ConfigError, IncompatibleError
from vflpriv.runner.planning import plan


def test_a_label_attack_is_run_by_the_passive_party_holding_the_auxiliary_labels(tiny):
    p = plan(tiny(partition={"parties": 4, "adversary": 2, "labeled": 100, "aux": 40}))
    assert p.attacks[0].adversary.party == 2 and p.attacks[0].adversary.victim is None
    assert set(p.wanted) == {2}


@pytest.mark.parametrize(("attack", "error", "needle"), [
    ({"adversary": 0}, ConfigError, "is run by partition.adversary"),
    ({"adversary": "server"}, ConfigError, "is run by partition.adversary"),
    ({"victim": 0}, ConfigError, "remove attack.victim"),
])
def test_a_label_attack_refuses_another_adversary_or_a_victim(tiny, attack, error, needle):
    with pytest.raises(error, match=needle):
        plan(tiny(attack={"options": {"epochs": 20}, "prior": "aux", **attack}))


def test_a_label_attack_naming_its_own_adversary_plans_as_without(tiny):
    named = plan(tiny(attack={"options": {"epochs": 20}, "prior": "aux", "adversary": 1}))
    assert named.attacks[0].adversary.party == 1


def test_an_attack_s_roles_are_checked(tiny, monkeypatch):
    from vflpriv.attacks.labels.model_completion import ModelCompletion

    monkeypatch.setattr(ModelCompletion, "roles", frozenset({"active"}))
    with pytest.raises(IncompatibleError, match="may be run by the active party; its adversary here is party 1"):
        plan(tiny())
