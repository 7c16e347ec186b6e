"""Review fe2 R3: a plugin dataset's declaration of fitted preprocessings is part of the data its records name
(``data_fingerprint``), so one that changes only its declaration never resumes a stored epsilon; a plugin declaring
none fitted and every built-in keep the fingerprint they had."""

from __future__ import annotations

import pytest

from vflpriv.common.errors import ConfigError
from vflpriv.config.registry import DATASETS
from vflpriv.config.schema import DatasetConfig
from vflpriv.data import embedded, load
from vflpriv.data.base import VerticalDataset
from vflpriv.data.prep import STANDARDISED
from vflpriv.store.sqlite import Store
from vflpriv.tradeoff.sweep import sweep


@pytest.fixture
def plugin():
    """Register 'test-declared', a digits copy whose declaration the returned function sets."""
    declared = {"fitted": ("", "")}

    def loader(**kwargs) -> VerticalDataset:
        d = embedded.load_digits(**kwargs)
        return VerticalDataset("test-declared", d.x_train, d.y_train, d.x_test, d.y_test, d.num_classes, d.specs,
                               fitted_features=declared["fitted"])

    def declare(fitted) -> str:
        declared["fitted"] = fitted
        load._load.cache_clear()
        return load.data_fingerprint(DatasetConfig(name="test-declared"), parties=2)

    DATASETS.register("test-declared", loader)
    yield declare
    DATASETS._extra.pop("test-declared")
    load._load.cache_clear()


def test_a_changed_declaration_is_other_data_and_none_fitted_keeps_the_digest(plugin):
    plain = plugin(("", ""))
    assert plain == load._load("test-declared", 2, None, None)[0].digest  # as before the declaration counted
    fitted, undeclared = plugin(("", STANDARDISED)), plugin(None)
    assert len({plain, fitted, undeclared}) == 3 and fitted.startswith("fitted:")
    assert [load.data_fingerprint(DatasetConfig(name=n), parties=2) for n in ("digits", "breast-cancer")] == ["", ""]


def test_a_stored_epsilon_of_another_declaration_is_not_resumed(plugin, tiny, tmp_path):
    cfg = tiny(dataset={"name": "test-declared"}, model={"hidden": 16, "out_dim": 8},
               finetune={"epochs": 1, "batch_size": 64}, defenses=[{"name": "embedding-dp", "strength": 1.0}],
               attack={"name": "fi-decoder", "prior": "none", "options": {"epochs": 1}})
    plugin(("", ""))
    with Store(tmp_path / "r.sqlite") as store:
        sweep([cfg], store)
        assert store.get(cfg.key()).epsilon_features > 0
        plugin(("", STANDARDISED))
        with pytest.raises(ConfigError, match="computed on other data"):
            sweep([cfg], store)


def test_both_data_messages_tell_marked_fingerprints_apart(tmp_path):
    """Review fe3 F4: both messages cut a fingerprint to its first 12-16 characters, the declaration's marker for a
    marked plugin, so two data printed alike; and a changed declaration alone was called only other data."""
    from dataclasses import replace

    from typer.testing import CliRunner

    from vflpriv.cli import app
    from vflpriv.config.sweep import ExperimentConfig
    from vflpriv.runner.execution import blank_record
    from vflpriv.store.verification import other_data
    from vflpriv.tradeoff.gap import refuse_other_data

    stored, now, redeclared = ("fitted:c13407d9|" + "a" * 64, "fitted:c13407d9|" + "b" * 64,
                               "fitted:0badf00d|" + "a" * 64)
    ((_, data),) = other_data([("k", stored)], {"k": now})
    computed_on, this = data.removeprefix("computed on data ").split(", this data is ")
    assert computed_on != this
    ((_, declared),) = other_data([("k", stored)], {"k": redeclared})
    assert "fitted_features declaration 0badf00d" in declared and "declaration c13407d9" in declared
    with pytest.raises(ConfigError, match=r"other data \(or under another fitted_features declaration\)") as refused:
        refuse_other_data([("k", declared)], where="s.sqlite")
    assert "or --overwrite to recompute them" in str(refused.value)  # review hunt H9: docs/plugins.md names it
    with Store(tmp_path / "s.sqlite") as store:
        runs = ExperimentConfig.model_validate({"attack": {"name": "mc"}, "strengths": [1.0], "seeds": [0, 1]}).runs()
        store.put_many([replace(blank_record(run), training_key=f"t{seed}", utility=0.8,
                                attack_accuracy=0.3, prior_accuracy=0.2, leakage=0.1, num_classes=10,
                                utility_metric="accuracy", data_fingerprint=data)  # named as the runner names it
                        for seed, (run, data) in enumerate(zip(runs, (stored, now)))])
    result = CliRunner().invoke(app, ["table", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "o")])
    listed = result.output.split("(data_fingerprint ")[1].split("), pooled")[0]
    assert len(set(listed.split(", "))) == 2, result.output
