"""Two configurations of one defense (ISO on the gradients and on the embeddings) are two settings, never pooled."""

import json

import pytest
import yaml
from typer.testing import CliRunner

from vflpriv.cli import app

CONFIG = {"seeds": [0], "model": {"hidden": 32, "out_dim": 16}, "finetune": {"epochs": 2},
          "partition": {"labeled": 200, "aux": 20},
          "audit": {"attacks": ["gc"], "canaries": 20, "tune": False, "prior_epochs": 2,
                    "defenses": [{"name": "iso", "strengths": [1.0]},
                                 {"name": "iso", "kinds": ["embedding"], "strengths": [1.0]}]}}


def test_two_configurations_of_one_defense_at_one_strength_are_two_rows_with_their_own_canaries(tmp_path, monkeypatch):
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path / "cache"))
    (tmp_path / "audit.yaml").write_text(yaml.safe_dump(CONFIG))
    out = tmp_path / "audit"
    result = CliRunner().invoke(app, ["audit", "--method", "splitnn", "--config", str(tmp_path / "audit.yaml"),
                                      "--out", str(out), "--jobs", "1"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "audit.json").read_text())
    rows = [r for r in summary["canaries"]["rows"] if r["defense"] == "iso" and r["attack"] == "gc"]
    assert [r["canaries"] for r in rows] == [20, 20] and all(r["canary_guesses"] <= 20 for r in rows)  # not 40
    assert sorted(r["variant"] for r in rows) == ["on embedding", "on gradient"]
    defended = [d for d in summary["defenses"] if d["defense"] == "iso" and d["attack"] == "gc"]
    assert [d["seeds"] for d in defended] == [1, 1] and all(d["cap"] is not None for d in defended)  # a CAP each
    assert sorted(d.get("variant") for d in defended) == ["on embedding", "on gradient"]
    text = (out / "audit.md").read_text()
    assert "iso (on gradient)" in text and "iso (on embedding)" in text
    table = CliRunner().invoke(app, ["table", str(out), "--out", str(tmp_path / "tables")])
    assert table.exit_code == 0, table.output
    weakest = table.output.split("the weakest strength")[1].split("###")[0]
    assert "iso (finetune) [on gradient]" in table.output and "iso (finetune) [on embedding]" in table.output
    assert weakest.count("| iso |") == 2 and "| on embedding |" in weakest and "| on gradient |" in weakest


def test_the_active_adversary_s_decision_is_taken_per_configuration_of_a_defense():
    import pandas as pd

    from vflpriv.workflows.audit import AuditConfig, audit_grid
    from vflpriv.workflows.audit_recipes import defer_active, escalate, mark_partial

    cfg = AuditConfig.model_validate({**CONFIG, "method": {"name": "splitnn"}, "audit": {
        "attacks": ["mc", "mc-active"], "canaries": 0, "defenses": [
            {"name": "iso", "strengths": [1.0, 25.0]}, {"name": "iso", "kinds": ["embedding"], "strengths": [1.0, 25.0]}]}})
    now, deferred = defer_active(audit_grid(cfg)[0])
    passive = {None: 0.81, ("embedding",): 0.95}  # mc-active (0.83) beats mc on the gradient configuration only
    results = pd.DataFrame([{
        "config": json.dumps(r.model_dump(mode="json")), "attack": r.attack.name, "phase": r.attack.phase,
        "defense": r.swept.name if r.swept else "none", "strength": r.swept.strength if r.swept else 0.0,
        "seed": r.seed, "status": "ok", "train_seconds": 2.0, "attack_seconds": 1.0,
        "attack_accuracy": 0.83 if r.attack.name == "mc-active" else passive[tuple(r.swept.kinds or ()) or None]
        if r.swept else 0.81} for r in now])
    more, decisions = escalate(results, deferred, margin=0.015)
    assert {(d.on, d.passive_accuracy, d.escalated) for d in decisions} == {("on gradient", 0.81, True),
                                                                          ("on embedding", 0.95, False)}
    assert {tuple(r.swept.kinds or ()) for r in more} == {()}  # the gradient sweep's other strength only
    rows = [{"adversary": 1, "attack": "mc-active", "phase": "finetune", "defense": "iso", "variant": v, "cap": 0.2,
             "cap_std": None, "cap_status": "ok", "falls_to_prior_text": "not within λ=1"}
            for v in ("on gradient", "on embedding")]
    mark_partial(rows, decisions)
    assert [r["cap"] for r in rows] == [0.2, None]  # the embedding sweep ran at its weakest strength only


@pytest.mark.parametrize(("method", "defense", "phase"), [
    ("fedhssl", "sparsify", "pretrain"), ("fedhssl", "iso", "pretrain"), ("fedhssl", "gaussian-message", "pretrain"),
    ("splitnn", "sparsify", "finetune"), ("splitnn", "gaussian-message", "finetune"),
])
def test_a_configuration_without_kinds_is_named_by_the_kinds_the_planner_gives_it(method, defense, phase):
    """Sparsify in FedHSSL's pretraining, kinds unset, protects embeddings and weights (no gradient is sent there);
    the tables named it "on gradient", its default."""
    from vflpriv.config.schema import RunConfig
    from vflpriv.runner.planning import plan_training
    from vflpriv.tradeoff.variants import flatten, shown

    config = RunConfig.model_validate({"method": {"name": method}, "attack": {"name": "fi-decoder"},
                                       "defenses": [{"name": defense, "phase": phase, "strength": 1.0}]})
    (built,) = plan_training(config).defenses
    assert shown(flatten(config.model_dump(mode="json")), "defenses.0.kinds") == "on " + "+".join(sorted(built.kinds))


def test_a_plugin_method_whose_traffic_is_set_per_instance_gets_the_default_name_not_a_crash():
    """``vflpriv table`` names a configuration by the planner's kinds from the method's class; a plugin whose ``sends``
    is a property (set per instance) has none there: the defense's default names it (it crashed the tables)."""
    from vflpriv.config.registry import METHODS
    from vflpriv.tradeoff.variants import acts_on

    class PerInstance(METHODS.get("splitnn")):
        @property
        def sends(self):
            return super().sends

    METHODS.register("per-instance-traffic", PerInstance)
    try:
        assert acts_on("sparsify", "finetune", None, method="per-instance-traffic") == acts_on("sparsify", "finetune",
                                                                                              None)
    finally:
        METHODS._extra.pop("per-instance-traffic")


def test_a_stored_run_of_a_method_not_installed_here_is_named_by_its_defense_s_default():
    """``vflpriv table`` reads method names from stored records: a plugin uninstalled since must not fail it."""
    from vflpriv.tradeoff.variants import acts_on

    assert acts_on("sparsify", "finetune", None, method="no-such-plugin") == acts_on("sparsify", "finetune", None)


def test_kinds_unset_and_kinds_set_to_what_unset_resolves_to_are_two_variants_not_one():
    """Review fin2 G7: iso swept once with kinds unset and once with kinds [gradient] were both named "on gradient",
    so their seeds met in one leakage test and ``vflpriv table`` raised a traceback."""
    import json

    import pandas as pd

    from vflpriv.tradeoff.variants import with_variants

    def config(kinds):
        iso = {"name": "iso", "phase": "finetune", "strength": 1.0, "sweep": True,
               **({"kinds": kinds} if kinds else {})}
        return json.dumps({"method": {"name": "splitnn"}, "attack": {"name": "mc"}, "defenses": [iso]})

    frame = pd.DataFrame([{"method": "splitnn", "dataset": "digits", "attack": "mc", "defense": "iso",
                           "phase": "finetune", "seed": seed, "config": config(kinds)}
                          for kinds in (None, ["gradient"]) for seed in (0, 1)])
    names = with_variants(frame)["variant"]
    assert names.nunique() == 2 and names.str.contains("kinds").all()
    other = frame.assign(config=[config(k) for k in (None, None, ["embedding"], ["embedding"])])
    assert set(with_variants(other)["variant"]) == {"on gradient", "on embedding"}  # read apart: named as before
    three = frame.assign(config=[config(k) for k in (None, ["gradient"], ["embedding"], ["embedding"])])
    assert with_variants(three)["variant"].str.startswith("defenses.0.kinds=").all()  # one setting, one spelling


def test_every_attack_of_one_training_spells_a_setting_alike():
    """Review last2 R5: mc and gc on three trainings (kinds unset, [gradient], [embedding]); mc's names differ by its
    own epochs, gc's collide. Both attacks must name the trainings' kinds one way, not mc "on embedding" beside gc
    ``defenses.0.kinds=["embedding"]``."""
    import json

    import pandas as pd

    from vflpriv.tradeoff.variants import with_variants

    def config(attack, kinds, epochs):
        iso = {"name": "iso", "phase": "finetune", "strength": 1.0, "sweep": True,
               **({"kinds": kinds} if kinds else {})}
        options = {"mc": {"epochs": epochs}} if attack == "mc" else {}
        return json.dumps({"method": {"name": "splitnn"}, "attack": {"name": ["mc", "gc"], "options": options},
                           "defenses": [iso]})

    frame = pd.DataFrame([{"method": "splitnn", "dataset": "digits", "attack": attack, "defense": "iso",
                           "phase": "finetune", "seed": 0, "config": config(attack, kinds, epochs)}
                          for kinds, epochs in ((None, 5), (["gradient"], 10), (["embedding"], 5))
                          for attack in ("mc", "gc")])
    names = with_variants(frame)["variant"].tolist()
    kinds = [name.split(", ")[-1] for name in names]
    assert kinds[0::2] == kinds[1::2] == ["defenses.0.kinds=unset", 'defenses.0.kinds=["gradient"]',
                                          'defenses.0.kinds=["embedding"]'], names
