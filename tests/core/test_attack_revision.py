"""An attack revised under its name (``Attack.revision``) gets run keys of its own, as a revised method or defense
does, so a store of the earlier algorithm's records is recomputed rather than resumed; revision 0 keys as before
(every existing store resumes), and the training the attack reads is the same one."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

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


def _cache_keys(name: str, monkeypatch) -> tuple[str, str, str]:
    """The keys a cached result of attack ``name`` is found under: its tuned trials' (``runner.attacking.tuned``), its
    same-attack prior's (``runner.prior.prior_key``, also the in-process priors') and its training's."""
    import torch

    from vflpriv.runner import attacking
    from vflpriv.runner.planning import AttackPlan
    from vflpriv.runner.prior import PriorPlan, prior_key

    cfg = RunConfig.model_validate({"attack": {"name": name}})
    seen = {}
    monkeypatch.setattr(attacking, "search", lambda attack, view, **kw: seen.setdefault("key", kw["key"]))
    plan = AttackPlan(config=cfg, attack=SimpleNamespace(options=ATTACKS.get(name).Options()), prior=None)
    attacking.tuned(plan, None)
    ids = torch.arange(4)
    view = SimpleNamespace(target_ids={"test": ids}, aux_ids=ids)
    return seen["key"], prior_key(PriorPlan(cfg, "same-attack", False, {}, False), view), cfg.training_key()


@pytest.mark.parametrize("name", ["mc", "mc-active"])
def test_a_revised_attack_s_cached_trials_prior_and_acting_training_are_keyed_anew(monkeypatch, name):
    """Finding 1 of the s10 review: the tuned trials and the same-attack prior of revision 1 were revision 0's."""
    monkeypatch.setattr(ATTACKS.get(name), "revision", 0)  # mc-active is at 1 (mc-mixmatch's)
    before = _cache_keys(name, monkeypatch)
    monkeypatch.setattr(ATTACKS.get(name), "revision", 1)
    after = _cache_keys(name, monkeypatch)
    assert after[0] != before[0] and after[1] != before[1]
    assert (after[2] != before[2]) == ATTACKS.get(name).acts  # only an acting attack's training is its own
    monkeypatch.setattr(ATTACKS.get(name), "revision", 0)
    assert _cache_keys(name, monkeypatch) == before  # revision 0 keys as before: every cache and store resumes


def test_a_plugin_attack_s_code_is_in_its_cached_results_keys(monkeypatch, tmp_path):
    """vflpriv's code version does not see a plugin's code: its loaded code is hashed into the keys (a method's file is
    into its pretraining's, ``pretrain_key``)."""
    import importlib.util
    import sys

    source = "from vflpriv.attacks.labels.model_completion import ModelCompletion\n" \
             "class Plugin(ModelCompletion):\n    acts = True\n"

    def load(text: str):
        path = tmp_path / "plugin_attack.py"
        path.write_text(text)
        spec = importlib.util.spec_from_file_location("plugin_attack", path)
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, "plugin_attack", module)
        spec.loader.exec_module(module)
        monkeypatch.setitem(ATTACKS._extra, "test-plugin", module.Plugin)

    load(source)
    before = _cache_keys("test-plugin", monkeypatch)
    load(source + "    # a comment: the same code\n")
    assert _cache_keys("test-plugin", monkeypatch) == before
    load(source + "    def infer(self, view):\n        return super().infer(view)\n")  # the plugin's code edited
    after = _cache_keys("test-plugin", monkeypatch)
    assert all(a != b for a, b in zip(after, before))


def test_a_plugin_attack_without_a_source_file_is_keyed_by_its_loaded_code(monkeypatch):
    """A class of a notebook, ``python -c`` or a zip has no file: keying it by its file's bytes raised OSError (an
    acting plugin failed in planning with a traceback, a tuned one failed its run); its compiled code keys it."""
    import sys
    import types

    def load(text: str):
        module = types.ModuleType("plugin_without_file")
        exec(compile(text, "<notebook cell>", "exec"), module.__dict__)
        monkeypatch.setitem(sys.modules, "plugin_without_file", module)
        monkeypatch.setitem(ATTACKS._extra, "test-plugin", module.Plugin)

    source = "from vflpriv.attacks.labels.model_completion import ModelCompletion\n" \
             "class Plugin(ModelCompletion):\n    acts = True\n"
    load(source)
    before = _cache_keys("test-plugin", monkeypatch)
    load(source.replace("acts = True", "acts = True\n    lr_scale = 2.0"))
    assert all(a != b for a, b in zip(_cache_keys("test-plugin", monkeypatch), before))


def test_a_revised_attack_tunes_and_fits_its_prior_again_instead_of_reading_revision_0_s(tmp_path, monkeypatch):
    """The reviewer's case: at revision 1 the tuned run made 1 infer call (the refit), reading revision 0's trials and
    same-attack prior; it makes as many as revision 0 did."""
    from typer.testing import CliRunner

    from vflpriv.cli import app

    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path / "cache"))
    mc, calls = ATTACKS.get("mc"), []
    real = mc.infer
    monkeypatch.setattr(mc, "infer", lambda self, *a, **k: calls.append(mc.revision) or real(self, *a, **k))
    args = ["evaluate", "--method", "splitnn", "--attack", "mc", "--defense", "none", "--seeds", "0", "--set",
            "partition.labeled=60", "--set", "partition.aux=20", "--set", "finetune.epochs=1", "--set", "attack.tune=true",
            "--set", "attack.search_budget=8", "--set", "attack.prior=same-attack", "--set", "attack.options.epochs=2",
            "--out", str(tmp_path / "o"), "--overwrite"]
    for revision in (0, 1):
        monkeypatch.setattr(mc, "revision", revision)
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
    assert calls.count(0) > 2 and calls.count(1) == calls.count(0)
