"""Review eps6 E6: an auditor plugin (``finetune.auditor``, which crafts canaries in the training) was keyed by its name
and options only, so an edited one resumed its stored records and cached search trials. Its code now marks the run
and training keys as a plugin defense's does; a built-in auditor's keys are unchanged."""

from __future__ import annotations

from vflpriv.auditors.gradient_lrt import GradientLRT
from vflpriv.config.registry import AUDITORS
from vflpriv.config.schema import RunConfig


class _Aud(GradientLRT):
    def menu(self):
        return super().menu()


class _AudEdited(GradientLRT):
    def menu(self):
        return tuple(2 * m for m in super().menu())


def _config(auditor: str) -> RunConfig:
    return RunConfig.model_validate({
        "partition": {"canaries": 8}, "attack": {"name": "mc"},
        "finetune": {"auditor": auditor, "auditor_options": {"canary_inputs": "crafted"}, "top": "linear",
                     "top_depth": 0},
        "defenses": [{"name": "dp-gaussian", "strength": 0.5, "sweep": True}]})


def test_an_edited_auditor_plugin_is_another_run_and_training(monkeypatch):
    keys = []
    for cls in (_Aud, _AudEdited, _Aud):
        monkeypatch.setitem(AUDITORS._extra, "t-aud", cls)
        keys.append((_config("t-aud").key(), _config("t-aud").training_key()))
    assert keys[0] == keys[2] and keys[0][0] != keys[1][0] and keys[0][1] != keys[1][1]


def test_a_built_in_auditor_s_keys_are_unchanged():
    """The keys as 361de35 computed them (``cache.code_version`` apart, which is not in them)."""
    assert (_config("gradient-lrt").key(), _config("gradient-lrt").training_key()) == ("8884d523237c4d5344c5",
                                                                                      "828636e5b6e49990ba86")
