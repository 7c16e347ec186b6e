"""Named presets: shipped config files under --config, options and --set; per-method options by pattern."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from vflpriv.cli import app
from vflpriv.cli.evaluate import build_experiment
from vflpriv.config import presets
from vflpriv.tradeoff.grid import experiments

NO_OPTIONS = dict(config=None, attack=None, defense=None, dataset=None, strengths=None, seeds=None, phase=None,
                  jobs=None, backend=None, device=None)


def test_presets_are_listed_with_their_description_and_unknown_ones_name_the_valid_ones():
    runner = CliRunner()
    listed = runner.invoke(app, ["list", "presets"])
    assert listed.exit_code == 0
    assert [line.split(":")[0] for line in listed.output.splitlines()] == presets.names()
    assert {"fedhssl-paper", "mixmatch-fu"} <= set(presets.names())
    bad = runner.invoke(app, ["evaluate", "--preset", "nope"])
    assert bad.exit_code == 2 and "valid presets: fedhssl-paper, mixmatch-fu, oneshot-paper, ssvfl-paper, vflhlp-paper" in bad.output


def test_fedhssl_paper_sets_the_codes_finetuning_and_each_methods_own_budget():
    hssl = build_experiment(method="fedhssl", preset="fedhssl-paper", overrides=[], **NO_OPTIONS)
    f = hssl.finetune
    assert (f.optimizer, f.lr, f.momentum, f.weight_decay, f.schedule, f.grad_clip, f.batch_size, f.epochs) == (
        "sgd", 0.01, 0.9, 3e-5, "cosine", 5.0, 512, 20)
    assert f.bn_recalibrate is True  # FedSplitNN is not read out of stale BatchNorm statistics
    assert hssl.method.options == {"batch_size": 512, "global_iterations": 40, "clean_view": "tabular",
                                   "crop_scale": [0.3, 1.0], "color_jitter": [0.3, 0.3, 0.3, 0.1],
                                   "blur_sigma": [0.1, 2.0]}
    local = build_experiment(method="local-simsiam", preset="fedhssl-paper", overrides=[], **NO_OPTIONS)
    assert local.method.options["epochs"] == 40 and "global_iterations" not in local.method.options
    split = build_experiment(method="splitnn", preset="fedhssl-paper", overrides=[], **NO_OPTIONS)
    assert split.method.options == {} and split.finetune.batch_size == 512


@pytest.mark.parametrize(("dataset", "overrides", "batch"), [
    ("digits", [], 512), ("satellite", [], 512), ("fashion-mnist", [], 128), ("fashion-mnist-views", [], 128),
    ("cifar10", [], 128), ("fashion-mnist", ["finetune.batch_size=64"], 64),
    ("satellite", ["finetune.batch_size=32"], 32),
])
def test_fedhssl_paper_finetunes_images_at_128_and_tabular_data_at_512_unless_told(dataset, overrides, batch):
    options = {**NO_OPTIONS, "dataset": dataset}
    assert build_experiment(method="splitnn", preset="fedhssl-paper", overrides=overrides,
                            **options).finetune.batch_size == batch


def test_a_config_file_may_not_carry_a_preset_s_settings_per_dataset(tmp_path):
    (tmp_path / "c.yaml").write_text("dataset_settings: {'*': {finetune: {batch_size: 8}}}\n")
    result = CliRunner().invoke(app, ["evaluate", "--config", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "dataset_settings is a preset's key" in result.output
    assert not (tmp_path / "o").exists()


def test_a_grid_over_datasets_gives_each_cell_its_dataset_s_settings():
    from vflpriv.config.parse import merged
    from vflpriv.config.presets import load


    raw = merged(load("fedhssl-paper"), {"methods": ["splitnn"], "datasets": ["digits", "fashion-mnist"]})
    cells = experiments(raw, must_match=set())  # the preset's method patterns serve other grids
    assert {e.dataset.name: e.finetune.batch_size for e in cells} == {"digits": 512, "fashion-mnist": 128}


def test_set_overrides_the_preset_for_the_method_and_through_its_pattern():
    direct = build_experiment(method="fedhssl", preset="fedhssl-paper", overrides=[
        "method.options.global_iterations=2", "finetune.lr=0.03"], **NO_OPTIONS)
    assert direct.method.options["global_iterations"] == 2 and direct.method.options["batch_size"] == 512
    assert direct.finetune.lr == 0.03
    pattern = build_experiment(method="fedhssl-moco", preset="fedhssl-paper",
                               overrides=["method_options.fedhssl*.global_iterations=3"], **NO_OPTIONS)
    assert pattern.method.options["global_iterations"] == 3


def test_mixmatch_fu_is_fu_et_als_attack_settings():
    exp = build_experiment(method=None, preset="mixmatch-fu", overrides=[], **NO_OPTIONS)
    assert exp.attack.name == "mc-mixmatch"
    assert {k: exp.attack.options[k] for k in ("epochs", "iterations", "batch_size", "views", "head_init")} == {
        "epochs": 10, "iterations": 1024, "batch_size": 16, "views": 1, "head_init": "ones"}


def test_a_grid_applies_method_options_to_each_method_cell():
    cells = experiments({"methods": ["splitnn", "local-byol", "fedhssl"],
                         "method_options": {"fedhssl*": {"global_iterations": 2}, "local-*": {"epochs": 3}}})
    assert [c.method.options for c in cells] == [{}, {"epochs": 3}, {"global_iterations": 2}]


def test_a_bad_method_options_table_is_one_error_line():
    from vflpriv.common.errors import ConfigError

    with pytest.raises(ConfigError, match="method_options must map"):
        experiments({"methods": ["splitnn"], "method_options": {"fedhssl*": 3}})


def test_the_paper_presets_set_each_papers_split_and_setting():
    """Papers 001-003 (shared/FAITHFULNESS-001-003.md: X1, M1, M3, M4, M5): disjoint local rows where the paper divides
    them, VFLHLP's label setting for every method of its comparison, one-shot's feature-less server, SS-VFL's full
    alignment with the method's own pretraining behind the prior (auto), and A_SimSiam kept for FedHSSL's tables."""
    def built(method, preset):
        return build_experiment(method=method, preset=preset, overrides=[], **NO_OPTIONS)

    for method in ("splitnn", "local-a", "vflhlp"):
        exp = built(method, "vflhlp-paper")
        assert (exp.partition.unaligned, exp.partition.active_labels_local) == ("disjoint", True)
        assert (exp.finetune.optimizer, exp.finetune.batch_size, exp.finetune.epochs) == ("sgd", 512, 20)
    for method in ("oneshot", "fewshot"):
        exp = built(method, "oneshot-paper")
        assert exp.partition.unaligned == "disjoint" and exp.method.options == {"server": "feature-less"}
    assert built("splitnn", "oneshot-paper").method.options == {}
    for method in ("splitnn", "ssvfl-i", "ssvfl-c"):
        exp = built(method, "ssvfl-paper")
        assert exp.partition.aligned_fraction == 1.0 and exp.attack.prior_ssl == "auto"
    assert built("local-moco", "fedhssl-paper").attack.prior_ssl == "simsiam"
