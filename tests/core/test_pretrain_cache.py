"""A finetune-phase sweep pretrains once per seed, and a cached pretraining changes no number."""

import pytest
import torch

from vflpriv.runner.execution import execute, pretrain_key
from vflpriv.runner.planning import plan
from vflpriv.store import cache

TINY_SSL = {"global_iterations": 1, "batch_size": 64, "projector_hidden": 32, "predictor_hidden": 8}


def _fedhssl(tiny, **changes):
    return tiny(method={"name": "fedhssl", "options": TINY_SSL}, **changes)


def test_cached_pretraining_gives_identical_numbers(tiny, monkeypatch):
    cfg = _fedhssl(tiny)
    (fresh,) = execute(plan(cfg))
    assert list(cache.cache_dir().glob("*.entry"))
    p = plan(cfg)
    real = cache.cached_modules  # (patching the method's class would be code of its own: another pretraining key)
    never = lambda: pytest.fail("pretrained again")  # noqa: E731
    monkeypatch.setattr(cache, "cached_modules", lambda key, skeleton, compute, **kw: real(key, skeleton, never, **kw))
    (cached,) = execute(p)
    for field in ("utility", "attack_accuracy", "comm_mb", "comm_mb_pretrain", "comm_messages"):
        assert getattr(fresh, field) == getattr(cached, field), field
    assert fresh.comm_mb_pretrain > 0


def test_key_covers_what_pretraining_depends_on(tiny):
    base = _fedhssl(tiny)
    method = plan(base).method.__class__
    key = pretrain_key(base, method)
    finetune_only = _fedhssl(tiny, finetune={"epochs": 5}, defenses=[{"name": "iso", "strength": 5, "sweep": True}])
    assert pretrain_key(finetune_only, method) == key
    assert pretrain_key(_fedhssl(tiny, partition={"labeled": 90, "aux": 40}), method) == key
    for changed in (
        _fedhssl(tiny, seed=1),
        _fedhssl(tiny, partition={"aligned_fraction": 0.5}),
        _fedhssl(tiny, defenses=[{"name": "iso", "strength": 1, "phase": "pretrain", "kinds": ["embedding"]}]),
        tiny(method={"name": "fedhssl", "options": {**TINY_SSL, "gamma": 0.1}}),
    ):
        assert pretrain_key(changed, method) != key


def test_label_budget_does_not_change_a_label_free_pretraining(tiny, monkeypatch):
    """Why the key may ignore labeled/aux: the same seed pretrains bit-identical weights for any budget."""
    saved = []
    monkeypatch.setattr(cache, "load", lambda *a: False)
    monkeypatch.setattr(cache, "save", lambda key, modules, meter: saved.append([m.state_dict() for m in modules]))
    for partition in ({}, {"labeled": 90, "aux": 40}):
        execute(plan(_fedhssl(tiny, partition=partition)))
    (a, b) = saved
    for sa, sb in zip(a, b):
        assert sa.keys() == sb.keys()
        assert all(torch.equal(sa[k], sb[k]) for k in sa)


def test_a_label_reading_pretraining_is_keyed_by_label_budget_and_label_defenses(tiny, monkeypatch):
    """Supervised pretraining (VFLHLP step 1) sees the labels label-DP randomised, whatever its phase."""
    base = _fedhssl(tiny)
    method = plan(base).method.__class__
    label_dp = _fedhssl(tiny, defenses=[{"name": "label-dp", "strength": 1.0, "sweep": True}])
    fewer = _fedhssl(tiny, partition={"labeled": 90})
    assert pretrain_key(label_dp, method) == pretrain_key(base, method)
    monkeypatch.setattr(method, "pretrain_reads_labels", True)
    key = pretrain_key(base, method)
    assert pretrain_key(label_dp, method) != key and pretrain_key(fewer, method) != key


def test_parallel_runs_of_one_seed_pretrain_once(tiny, monkeypatch):
    """Two runs needing the same pretraining at the same time: one pretrains, the other waits and loads."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    plans = [plan(_fedhssl(tiny, defenses=[{"name": "iso", "strength": s, "sweep": True}])) for s in (1.0, 5.0)]
    method_cls = type(plans[0].method)
    real, calls, started = method_cls.pretrain, [], threading.Barrier(2)

    def counted(self, fed):
        calls.append(1)
        return real(self, fed)

    def run_both(p):
        started.wait()
        return execute(p)

    monkeypatch.setattr(method_cls, "pretrain", counted)
    with ThreadPoolExecutor(2) as pool:
        (a,), (b,) = pool.map(run_both, plans)
    assert len(calls) == 1
    assert a.comm_mb_pretrain == b.comm_mb_pretrain > 0


def test_entries_computed_while_a_command_checks_are_written_only_once_it_runs(tmp_path):
    from vflpriv.store import cache

    calls = []

    def compute():
        calls.append(1)
        return {"test": [1, 2]}

    def entry(name):
        path = tmp_path / "c" / name
        return cache.cached(path, compute, read=cache._read_labels, lock=cache.claim(name, tmp_path / "c"),
                            write=lambda p, v: cache.write_entry(p, __import__("json").dumps(v).encode()))

    with pytest.raises(RuntimeError), cache.held_back():
        assert entry("refused") == {"test": [1, 2]}
        raise RuntimeError("refused while checking")
    assert not (tmp_path / "c").exists()  # no entry, no lock file, no folder
    with cache.held_back():
        entry("kept")
        assert not (tmp_path / "c").exists()
    assert (tmp_path / "c" / "kept").exists() and len(calls) == 2
    with cache.held_back():
        assert entry("kept") == {"test": [1, 2]} and len(calls) == 2  # read, not computed again


def test_a_pretraining_of_undeclared_plugin_code_is_keyed_by_the_label_defenses(tiny):
    """Review eps F1: a VFLHLP-P subclass whose own ``pretrain`` may read the labels, declaring nothing, never reuses
    the pretraining of an undefended run under label-dp's epsilon; VFLHLP-P itself still shares it."""
    from vflpriv.methods.vflhlp import VFLHLPPassive

    class Peeking(VFLHLPPassive):
        def pretrain(self, fed):
            return super().pretrain(fed)

    base = tiny(method={"name": "vflhlp-p"})
    label_dp = tiny(method={"name": "vflhlp-p"}, defenses=[{"name": "label-dp", "strength": 1.0, "sweep": True}])
    assert pretrain_key(label_dp, VFLHLPPassive) == pretrain_key(base, VFLHLPPassive)
    assert pretrain_key(label_dp, Peeking) != pretrain_key(base, Peeking)
    assert pretrain_key(tiny(method={"name": "vflhlp-p"}, partition={"labeled": 90}), Peeking) != \
        pretrain_key(base, Peeking)


def test_a_pretraining_of_undeclared_feature_code_is_keyed_by_the_feature_defenses(tiny):
    """Review eps2 G5: a VFLHLP-P subclass whose own ``pretrain`` declares no ``feature_uses`` never shares the
    pretraining of a run without embedding-dp (a finetune-phase feature defense); VFLHLP-P itself still does."""
    from vflpriv.methods.vflhlp import VFLHLPPassive

    class Peeking(VFLHLPPassive):
        def label_uses(self):  # its labels declared: the feature rule alone decides
            return super().label_uses()

        def pretrain(self, fed):
            return super().pretrain(fed)

    base = tiny(method={"name": "vflhlp-p"})
    edp = tiny(method={"name": "vflhlp-p"}, defenses=[{"name": "embedding-dp", "strength": 8.0, "party": 1,
                                                        "sweep": True}])
    assert pretrain_key(edp, VFLHLPPassive) == pretrain_key(base, VFLHLPPassive)
    assert pretrain_key(edp, Peeking) != pretrain_key(base, Peeking)
