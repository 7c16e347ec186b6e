"""Review l6 L4: an attack run with its default roles given (``attack.adversary=0`` for a feature attack, as an audit
writes its roles) is another key of the run evaluate writes with them unset; both in one store counted each seed
twice, and ``vflpriv table``/``report`` stopped with a traceback (ValueError: seed(s) 0, 1 appear more than once).
Records the tables still cannot tell apart are one error line naming them, exit 2."""

from __future__ import annotations

import json
import math
from pathlib import Path

from typer.testing import CliRunner

from vflpriv.cli import app
from vflpriv.config.sweep import ExperimentConfig
from vflpriv.reports.results import current_records, load_results
from vflpriv.runner.naming import roles_of
from vflpriv.store.records import RunRecord
from vflpriv.store.sqlite import Store


def _runs(attack: dict, seeds=(0, 1)):
    return ExperimentConfig.model_validate({"attack": attack, "strengths": [1.0], "seeds": list(seeds)}).runs()


def _record(run, mse: float = 0.05, *, key: str | None = None) -> RunRecord:
    """A record of ``run`` as a run writes it (its roles resolved into the columns); a feature attack's MSEs."""
    secret, adversary, victim = roles_of(run)
    features = {"attack_errors": json.dumps([mse] * 3), "prior_errors": json.dumps([0.08] * 3), "feature_mse": mse,
                "prior_mse": 0.08, "n_targets": 3, "attack_accuracy": math.nan, "prior_accuracy": math.nan}
    errors = features if secret == "features" else {"attack_accuracy": 0.6, "prior_accuracy": 0.5}
    return RunRecord(key=key or run.key(), training_key=run.training_key(), method=run.method.name,
                     dataset=run.dataset.name, attack=run.attack.name, defense="iso", phase="finetune", strength=1.0,
                     strength_axis="lambda", strength_stronger="higher", strength_identity=0.0, num_classes=10,
                     seed=run.seed, utility=0.8, secret=secret, adversary=adversary, victim=victim,
                     config=json.dumps(run.as_read().model_dump(mode="json"), sort_keys=True), **errors)


def test_a_run_with_its_default_roles_given_is_one_run_with_them_unset():
    unset = _runs({"name": "fi-decoder"})
    given = _runs({"name": "fi-decoder", "adversary": 0}) + _runs({"name": "fi-decoder", "adversary": 0, "victim": 1})
    labels = _runs({"name": "mc"}) + _runs({"name": "mc", "adversary": 1})  # partition.adversary, given
    kept, superseded = current_records([_record(r) for r in unset + given + labels])
    assert sorted(r.key for r in kept) == sorted(r.key() for r in unset + labels[:2])
    assert len(superseded) == 6 and all("given otherwise" in why for _, why in superseded)


def test_roles_that_are_no_default_stay_another_run():
    active, server = _runs({"name": "fi-decoder", "adversary": 0}, [0]) + _runs({"name": "fi-decoder",
                                                                                  "adversary": "server"}, [0])
    kept, superseded = current_records([_record(active), _record(server)])
    assert len(kept) == 2 and not superseded
    wrong = _record(server, key="0" * 20)  # its columns say the active party ran it, its settings the server
    wrong = RunRecord(**{**wrong.__dict__, "adversary": "0"})
    assert len(current_records([_record(active), wrong])[0]) == 2


def _store(tmp_path: Path, records: list[RunRecord]) -> Path:
    store = Store(tmp_path / "results.sqlite")
    for record in records:
        store.put(record)
    return tmp_path / "results.sqlite"


def test_vflpriv_table_and_report_count_each_seed_once_where_one_run_has_its_roles_given_and_unset(tmp_path):
    path = _store(tmp_path, [_record(r) for r in _runs({"name": "fi-decoder"}) + _runs({"name": "fi-decoder",
                                                                                         "adversary": 0})])
    for command in ("table", "report"):
        result = CliRunner().invoke(app, [command, str(path), "--out", str(tmp_path / command)])
        assert result.exit_code == 0, result.output
        assert "2 record(s) of a run stored under another key left out" in result.output


def test_a_record_at_a_strength_its_settings_do_not_sweep_is_left_out_as_damaged(tmp_path):
    """Settings of two swept strengths recorded at one strength (a hand edit): one seed twice in one leakage test was an
    error line; the record naming another strength than its settings is damaged (review hunt H5), the rest tabled."""
    first, second = ExperimentConfig.model_validate({"strengths": [1.0, 2.0], "seeds": [0]}).runs()
    path = _store(tmp_path, [_record(first), _record(second)])  # both recorded at strength 1
    for command in ("table", "report"):
        result = CliRunner().invoke(app, [command, str(path), "--out", str(tmp_path / command)])
        assert result.exit_code == 0, result.output
        assert (f"damaged record left out: run {second.key()}: its strength is 1.0, where its settings say 2.0"
                in result.output), result.output


def test_a_defense_with_the_kinds_unset_resolves_to_given_is_one_run_with_them_unset():
    """Found beside L4: iso's kinds given as ["gradient"] (what unset resolves to on splitnn) was a variant of its own
    (defenses.0.kinds=["gradient"] beside defenses.0.kinds=unset) of the same run; another kind stays another run."""
    def runs(kinds):
        return ExperimentConfig.model_validate({"defenses": [{"name": "iso", "sweep": True, "kinds": kinds}],
                                                "strengths": [1.0], "seeds": [0, 1]}).runs()

    unset, given, other = runs(None), runs(["gradient"]), runs(["embedding"])
    kept, superseded = current_records([_record(r) for r in given + unset + other])
    assert sorted(r.key for r in kept) == sorted(r.key() for r in unset + other) and len(superseded) == 2


def test_a_setting_whose_seeds_were_written_with_defaults_given_and_unset_is_one_variant(tmp_path):
    """Review rec2 R1: kinds given at seeds 0-2 and unset at seeds 0-1 (or a label attack's adversary given at seed 0,
    unset at seed 1) were two variants of one setting, of 1 and 2 seeds; now one row of 3 (2) seeds."""
    def iso(kinds, seeds):
        return ExperimentConfig.model_validate({"defenses": [{"name": "iso", "sweep": True, "kinds": kinds}],
                                                "strengths": [1.0], "seeds": list(seeds)}).runs()

    records = [_record(r) for r in iso(["gradient"], (0, 1, 2)) + iso(None, (0, 1))]
    records += [_record(r) for r in _runs({"name": "gc", "adversary": 1}, [0]) + _runs({"name": "gc"}, [1])]
    frame = load_results(_store(tmp_path, records))
    assert sorted(frame.groupby(["attack", "variant"])["seed"].nunique().to_dict().items()) == [
        (("gc", ""), 2), (("mc", ""), 3)]


def _grid(seeds=(0, 1), **settings):
    return ExperimentConfig.model_validate({"strengths": [1.0], "seeds": list(seeds), **settings}).runs()


def _rows(tmp_path: Path, records: list[RunRecord]) -> list:
    """(variant, seeds) of each row of the label attack mc's records as the tables read them."""
    frame = load_results(_store(tmp_path, records))
    return sorted(frame.groupby("variant")["seed"].nunique().to_dict().items())


def test_a_setting_given_at_what_the_planner_resolves_unset_or_auto_to_is_one_variant(tmp_path):
    """Review rec2 (what is left): a defense's party 0 beside unset (iso binds the active party), prior_ssl own beside
    auto where auto resolves to own, and prior_ssl beside a prior that reads none, were two rows of one run."""
    def iso(party, seeds):
        return _grid(seeds, defenses=[{"name": "iso", "sweep": True, "party": party}])

    def local(prior_ssl, seeds, prior="simsiam"):
        return _grid(seeds, method={"name": "local-simsiam"}, attack={"name": "mc", "prior": prior,
                                                                        "prior_ssl": prior_ssl})

    for runs in (iso(0, (0, 1)) + iso(None, (1, 2)), local("own", (0, 1)) + local("auto", (1, 2)),
                 local("simsiam", (0, 1), "aux") + local("auto", (1, 2), "aux")):
        assert _rows(tmp_path, [_record(r) for r in runs]) == [("", 3)]
        (tmp_path / "results.sqlite").unlink()


def test_settings_the_planner_resolves_apart_stay_two_variants(tmp_path):
    """A passive party's iso (on its embeddings) is not the active party's; own pretraining behind the prior (auto, on
    local-simsiam) is not SimSiam's."""
    runs = [r for party in (1, None) for r in _grid(defenses=[{"name": "iso", "sweep": True, "party": party}])]
    assert _rows(tmp_path, [_record(r) for r in runs]) == [("defenses.0.party=1", 2), ("defenses.0.party=unset", 2)]
    (tmp_path / "results.sqlite").unlink()
    runs = [r for ssl in ("own", "simsiam") for r in _grid(method={"name": "local-simsiam"},
                                                               attack={"name": "mc", "prior_ssl": ssl})]
    assert _rows(tmp_path, [_record(r) for r in runs]) == [("attack.prior_ssl=auto (own)", 2),
                                                           ("attack.prior_ssl=simsiam", 2)]  # what ran (review var F3)


def test_the_report_shows_what_a_setting_at_auto_ran_as(tmp_path):
    """Review var F3: records written with prior_ssl own, spelled auto, showed 'auto' in the report's settings: neither
    what was written nor what it ran as. SimSiam's runs beside them (splitnn) show theirs."""
    from vflpriv.reports.html import _settings

    runs = _grid(method={"name": "local-simsiam"}, attack={"name": "mc", "prior_ssl": "own"})
    shared, _ = _settings(load_results(_store(tmp_path, [_record(r) for r in runs])))
    assert ("attack.prior_ssl", "auto (own)") in shared
    (tmp_path / "results.sqlite").unlink()
    runs += _grid(method={"name": "splitnn"}, attack={"name": "mc"})
    _, varying = _settings(load_results(_store(tmp_path, [_record(r) for r in runs])))
    assert varying["attack.prior_ssl"] == {"auto (own)": ["local-simsiam / digits / mc"],
                                           "auto (simsiam)": ["splitnn / digits / mc"]}


def test_records_written_before_a_setting_existed_are_one_variant_with_the_current_ones(tmp_path):
    """Review l7 L7-6: seed 0 written before finetune.top_depth existed, seed 1 now: one row, not finetune.top_depth=0
    beside finetune.top_depth=unset."""
    old, new = _grid()
    config = json.loads(_record(old).config)
    del config["finetune"]["top_depth"]
    earlier = RunRecord(**{**_record(old).__dict__, "config": json.dumps(config, sort_keys=True)})
    assert _rows(tmp_path, [earlier, _record(new)]) == [("", 2)]
