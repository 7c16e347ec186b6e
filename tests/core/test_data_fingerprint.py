"""Every cached state and stored record derived from a dataset is keyed by the data it read
(``vflpriv.data.load.data_fingerprint``): a changed data file recomputes the pretraining, the adversary's own encoder
and its prior instead of reusing them, and a stored run of other data is recomputed instead of resumed; the same data
still hits the cache and resumes."""

from __future__ import annotations

import dataclasses
import gzip
import sqlite3

import pytest
import torch

from vflpriv.data import bundled, load
from vflpriv.runner import prior as label_prior
from vflpriv.runner.execution import execute, pretrain_key
from vflpriv.runner.planning import plan
from vflpriv.store import cache
from vflpriv.store.sqlite import Store

TINY_SSL = {"global_iterations": 1, "batch_size": 64, "projector_hidden": 32, "predictor_hidden": 8}


def _config(tiny):
    """FedHSSL (a cached pretraining) attacked with the simsiam prior (the adversary's own encoder, cached, and its
    predictions, cached)."""
    return tiny(method={"name": "fedhssl", "options": TINY_SSL},
                attack={"options": {"epochs": 5}, "prior": "simsiam", "prior_epochs": 5})


def _as_new_process() -> None:
    load._load.cache_clear()
    label_prior._ENCODERS.clear()
    label_prior._PRIORS.clear()


@pytest.fixture
def digits_file(tmp_path, monkeypatch):
    """A function pointing the digits loader at a copy of scikit-learn's file with its pixels changed by ``change``
    (None: the shipped file itself); the lru cache and the in-process memos are cleared as a new process would."""
    if bundled.data_file("digits") is None:
        pytest.skip("scikit-learn's digits file is not installed")
    shipped = bundled.data_file

    def point(change):
        if change is None:
            monkeypatch.setattr(bundled, "data_file", shipped)
        else:
            with gzip.open(shipped("digits"), "rt") as f:
                rows = [r.split(",") for r in f.read().splitlines()]
            path = tmp_path / f"digits-{change}.csv.gz"
            path.write_bytes(gzip.compress("\n".join(",".join([str(change)] * 64 + [r[-1]]) for r in rows).encode(),
                                           mtime=0))  # the same bytes whenever it is written
            monkeypatch.setattr(bundled, "data_file", lambda name: path)
        _as_new_process()

    yield point
    _as_new_process()  # later tests in this process must not get the changed digits


@pytest.fixture
def computed(monkeypatch):
    """The cache entries computed (not read) since the last clear, by file name."""
    found: list[str] = []
    real = cache.cached

    def spy(path, compute, **kwargs):
        return real(path, lambda: (found.append(path.name), compute())[1], **kwargs)

    monkeypatch.setattr(cache, "cached", spy)
    return found


def test_a_changed_data_file_recomputes_pretraining_encoder_and_prior(tiny, digits_file, computed):
    cfg = _config(tiny)
    method = type(plan(cfg).method)
    digits_file(None)
    execute(plan(cfg))
    before = pretrain_key(cfg, method)
    assert cache.entry_path(before).is_file() and computed
    computed.clear()
    digits_file(3)
    (record,) = execute(plan(cfg))
    after = pretrain_key(cfg, method)
    assert after != before
    assert cache.entry_path(after).name in computed  # pretrained again, not the other data's entry
    prior = plan(cfg).attacks[0].prior
    assert cache.entry_path(label_prior.encoder_key(prior)).name in computed  # the adversary's own encoder
    assert sum(name.endswith(".labels") for name in computed) >= 1  # the prior's predictions
    assert record.data_fingerprint == load.load_dataset(cfg.dataset, parties=2).digest != ""


def test_the_same_data_hits_every_cache(tiny, digits_file, computed):
    cfg = _config(tiny)
    digits_file(5)
    (first,) = execute(plan(cfg))
    assert computed
    computed.clear()
    digits_file(5)  # the same bytes, written again: the same fingerprint
    (again,) = execute(plan(cfg))
    assert computed == []
    assert (again.utility, again.attack_accuracy, again.prior_accuracy) == (
        first.utility, first.attack_accuracy, first.prior_accuracy)


def test_a_stored_run_of_other_data_is_refused_then_recomputed_on_request(tiny, digits_file, tmp_path):
    """A store holding a run computed on other data is refused (nothing deleted: a data folder pointed elsewhere by
    mistake loses no result); with ``replace_other_data`` (``--overwrite``) the run is recomputed on this data."""
    from vflpriv.common.errors import ConfigError
    from vflpriv.tradeoff.sweep import sweep
    from vflpriv.workflows.experiment import stored_keys

    cfg = tiny(attack={"options": {"epochs": 5}, "prior": "aux", "prior_epochs": 5})
    notes: list[str] = []
    digits_file(None)
    with Store(tmp_path / "s.sqlite") as store:
        sweep([cfg], store)
        (shipped,) = store.all()
        assert shipped.data_fingerprint == ""  # the pinned file
        assert stored_keys(tmp_path / "s.sqlite", [cfg]) == {cfg.key()}  # what a dry run counts as stored
        digits_file(7)
        with sqlite3.connect(tmp_path / "s.sqlite") as db:  # as a store written before the field: its data unknown
            db.execute("UPDATE runs SET record = json_remove(record, '$.data_fingerprint')")
        assert stored_keys(tmp_path / "s.sqlite", [cfg]) == {cfg.key()}
        sweep([cfg], store, on_note=notes.append)  # kept and resumed, neither refused nor recomputed
        assert notes == [] and store.all()[0].to_json() == shipped.to_json()
        store.put(shipped)  # the field back: now known to be of other data
        assert stored_keys(tmp_path / "s.sqlite", [cfg]) == set()
        with pytest.raises(ConfigError, match="1 of these runs computed on other data.*--overwrite"):
            sweep([cfg], store, on_note=notes.append)
        assert [r.to_json() for r in store.all()] == [shipped.to_json()]  # kept
        sweep([cfg], store, on_note=notes.append, replace_other_data=True)
        (changed,) = store.all()
    assert changed.data_fingerprint == load.load_dataset(cfg.dataset, parties=2).digest
    assert changed.utility != shipped.utility
    assert len(notes) == 1 and "1 record(s) of other data" in notes[0]


def test_the_shipped_files_are_the_pinned_ones():
    """A bundled dataset read from the pinned file is named '' (so stores made before the fingerprint resume)."""
    for name in bundled.FILES:
        if bundled.digest(name) is None:
            pytest.skip(f"scikit-learn's {name} file is not installed")
        assert bundled.digest(name) == bundled.PINNED[name]
    from vflpriv.config.schema import DatasetConfig

    assert load.data_fingerprint(DatasetConfig(name="digits"), parties=2) == ""


def test_the_digest_changes_with_any_value_dtype_or_shape():
    from vflpriv.data.base import PartySpec, VerticalDataset

    def dataset(x0, y=torch.tensor([0, 1])):
        return VerticalDataset("d", (x0,), y, (x0[:1],), y[:1], 2, (PartySpec("tabular", tuple(x0.shape[1:])),))

    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    base = dataset(x).digest
    assert dataset(x.clone()).digest == base
    assert dataset(x[:, [0, 1, 2]]).digest == base  # a copy, same values
    bumped = x.clone()
    bumped[1, 2] += 1
    assert dataset(bumped).digest != base
    assert dataset(x.view(torch.int32)).digest != base  # the same bytes read as another dtype
    assert dataset(x.t().contiguous().t()).digest == base  # non-contiguous storage, same tensor
    assert dataset(x, torch.tensor([1, 0])).digest != base
    assert dataclasses.replace(dataset(x), name="e").digest != base


def test_a_loader_naming_its_files_is_fingerprinted_by_them(tmp_path):
    """A loader with ``files_read`` is named by those files' digest (cheaper than its tensors'): a changed file is
    another fingerprint, the same bytes the same one."""
    import numpy as np

    from vflpriv.config.registry import DATASETS
    from vflpriv.config.schema import DatasetConfig
    from vflpriv.data.base import PartySpec, VerticalDataset

    def toy(*, parties=2, root=None, max_samples=None, seed=0):
        x = torch.from_numpy(np.load(root / "x.npy"))
        y = torch.arange(len(x)) % 2
        return VerticalDataset("toy", (x[:, :2], x[:, 2:]), y, (x[:, :2], x[:, 2:]), y, 2,
                               (PartySpec("tabular", (2,)), PartySpec("tabular", (2,))), fitted_features=("", ""))

    toy.files_read = lambda root: [root / "x.npy"]
    DATASETS.register("toy-files", toy)
    config = DatasetConfig(name="toy-files", root=tmp_path)

    def fingerprint(values):
        np.save(tmp_path / "x.npy", np.asarray(values, dtype=np.float32))
        load._load.cache_clear()
        return load.data_fingerprint(config, parties=2)

    first = fingerprint([[0, 1, 2, 3], [4, 5, 6, 7]])
    assert first == "files:" + load.files_digest([tmp_path / "x.npy"])
    assert fingerprint([[0, 1, 2, 3], [4, 5, 6, 8]]) != first
    assert fingerprint([[0, 1, 2, 3], [4, 5, 6, 7]]) == first
    del toy.files_read  # the same loader without it: named by its tensors
    load._load.cache_clear()
    assert load.data_fingerprint(config, parties=2) == load.load_dataset(config, parties=2).digest
    load._load.cache_clear()


def test_the_tuning_trials_and_the_feature_prior_are_keyed_by_the_data(tiny, monkeypatch):
    """The two keys the end-to-end tests above do not reach (a tuned attack's trials, cached; the feature prior, kept
    per process): another data fingerprint is another key."""
    from vflpriv.runner import attacking, feature_prior

    cfg = tiny(attack={"tune": True})
    attack = plan(cfg).attacks[0]
    monkeypatch.setattr(attacking, "search", lambda *a, key, **k: key)
    keys = {}
    for data in ("a", "b"):
        monkeypatch.setattr(attacking, "data_of", lambda config, data=data: data)
        monkeypatch.setattr(feature_prior, "data_of", lambda config, data=data: data)
        keys[data] = (attacking.tuned(attack, None), feature_prior.plan_feature_prior(cfg, None).training)
    assert keys["a"][0] != keys["b"][0] and keys["a"][1] != keys["b"][1]


def test_the_command_refuses_a_store_of_other_data_in_planning(digits_file, tmp_path):
    """``vflpriv evaluate`` into a store of runs computed on other data: one error line, exit 2, the store untouched
    (refused in planning, before any training); ``--overwrite`` recomputes them."""
    from typer.testing import CliRunner

    from vflpriv.cli import app

    args = ["evaluate", "--method", "splitnn", "--attack", "mc", "--defense", "none", "--seeds", "0",
            "--set", "finetune.epochs=1", "--set", "partition.labeled=40", "--out", str(tmp_path / "out")]
    runner = CliRunner()
    digits_file(None)
    assert runner.invoke(app, args).exit_code == 0
    store = tmp_path / "out" / "results.sqlite"
    before = store.read_bytes()
    digits_file(3)
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "computed on other data" in result.output and "--overwrite" in result.output
    assert result.output.strip().count("\n") == 0  # one line: refused in planning, before the run's header
    assert "Traceback" not in result.output and store.read_bytes() == before
    assert runner.invoke(app, [*args, "--overwrite"]).exit_code == 0
    assert store.read_bytes() != before


def test_each_dataset_of_a_grid_is_fingerprinted_once(monkeypatch):
    """A grid interleaving more datasets than the load cache keeps (4): each distinct one is fingerprinted once, not
    reloaded and hashed again per run."""
    from vflpriv.config.schema import RunConfig

    calls: list[tuple] = []
    monkeypatch.setattr(load, "data_of", lambda c: calls.append((c.dataset.max_samples, c.seed)) or
                        f"fp{c.dataset.max_samples}")
    configs = [RunConfig.model_validate({"dataset": {"name": "digits", "max_samples": 100 * (1 + i % 6)}, "seed": s})
               for s in range(3) for i in range(6)]
    found = load.data_by_key(configs)
    assert len(calls) == 6 and found == {c.key(): f"fp{c.dataset.max_samples}" for c in configs}
