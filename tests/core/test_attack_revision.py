"""An attack revised under its name (``Attack.revision``) gets run keys of its own, as a revised method or defense
does, so a store of the earlier algorithm's records is recomputed rather than resumed; revision 0 keys as before
(every existing store resumes), and the training the attack reads is the same one."""

from __future__ import annotations

from vflpriv.config.registry import ATTACKS
from vflpriv.config.schema import RunConfig


def test_a_revised_attack_s_runs_get_keys_of_their_own_on_the_same_training(monkeypatch):
    fi = RunConfig.model_validate({"attack": {"name": "fi-decoder"}})
    mc = RunConfig.model_validate({"attack": {"name": "mc"}})
    now = (fi.key(), fi.training_key(), mc.key())
    monkeypatch.setattr(ATTACKS.get("fi-decoder"), "revision", 1)
    assert fi.key() != now[0] and fi.training_key() == now[1] and mc.key() == now[2]
    revised = fi.key()
    monkeypatch.setattr(ATTACKS.get("fi-decoder"), "revision", 2)
    assert fi.key() not in (now[0], revised)
    monkeypatch.setattr(ATTACKS.get("fi-decoder"), "revision", 0)
    assert fi.key() == now[0]
