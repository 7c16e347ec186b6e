"""The adversary prior over the method's own pretraining done alone (``attack.prior_ssl=own``): for a method whose
pretraining is local (ssvfl-i), it is the adversary's pretrained encoder exactly, so an attack that reads only that
encoder shows no leakage, and the audit's verdict is "no"; methods without such a pretraining are refused."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from vflpriv.cli import app
from vflpriv.common.errors import IncompatibleError
from vflpriv.config.schema import RunConfig
from vflpriv.runner.execution import run_safely
from vflpriv.runner.planning import plan, plan_attack
from vflpriv.runner.prior import own_encoder

SMALL = {"model": {"hidden": 32, "out_dim": 16}, "finetune": {"epochs": 2, "batch_size": 32},
         "partition": {"labeled": 60, "aux": 40}, "method": {"name": "ssvfl-i", "options": {"epochs": 2}}}


def _run(**attack) -> RunConfig:
    return RunConfig.model_validate({**SMALL, "attack": {"name": "similarity", "prior": "same-attack",
                                                         "prior_ssl": "own", **attack}})


@pytest.mark.parametrize("method", [{"name": "ssvfl-i", "options": {"epochs": 2}},
                                    {"name": "vflhlp", "options": {"supervised_epochs": 2, "scarf_epochs": 1}},
                                    {"name": "vflhlp-a", "options": {"supervised_epochs": 2}}])
def test_own_pretraining_alone_is_the_methods_pretraining_of_the_adversary(method, tmp_path, monkeypatch):
    """ssvfl-i's MoCo, vflhlp's SCARF (step 2) and vflhlp-a's fresh passive encoder: done alone, bit for bit."""
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path))
    from vflpriv.runner.attacking import adversary_view
    from vflpriv.runner.execution import train

    cfg = _run(phase="pretrain").model_copy(update={"method": RunConfig.model_validate({"method": method}).method})
    p = plan(cfg)
    result = train(p)
    snapshot = result.encoder("pretrain", p.scenario.adversary)
    view = adversary_view(result.fed, p.scenario, snapshot, "pretrain", torch.Generator())
    alone, federated = own_encoder(p.attacks[0].prior, view), view.encoder
    for a, b in zip(alone.state_dict().values(), federated.state_dict().values(), strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("options", [{}, {"method": "kmeans"}])  # k-means draws: the prior must draw the same
@pytest.mark.parametrize("phase", ["pretrain", "finetune"])
def test_an_attack_on_a_local_pretraining_shows_no_leakage_against_its_own_pretraining(phase, options, tmp_path,
                                                                                       monkeypatch):
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path))
    for seed in (0, 1):
        (record,) = run_safely([_run(phase=phase, options=options).model_copy(update={"seed": seed})])
        assert record.status == "ok", record.error
        assert record.leakage == 0.0 and record.attack_hits == record.prior_hits
    # against plain SimSiam the same attack reads the difference between MoCo and SimSiam as "leakage"
    (simsiam,) = run_safely([RunConfig.model_validate({**SMALL, "attack": {"name": "similarity", "prior": "same-attack",
                                                                           "prior_ssl": "simsiam"}})])
    assert simsiam.status == "ok" and simsiam.leakage != 0.0


def test_own_prior_is_refused_for_a_method_without_a_local_pretraining():
    cfg = RunConfig.model_validate({**SMALL, "method": {"name": "splitnn"}, "attack": {"name": "mc", "prior_ssl": "own"}})
    with pytest.raises(IncompatibleError, match="has no pretraining a party can do alone"):
        plan_attack(cfg, plan(cfg))


def test_the_audit_says_no_where_the_attack_cannot_beat_the_prior(tmp_path, monkeypatch):
    """ssvfl-i sends the passive parties nothing label-bearing: the audit (tuned; prior_ssl auto = own for it) says
    "no": the tuned same-attack prior makes the tuned attack's choices on the same encoder with the same stream."""
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path / "cache"))
    sets = [a for k, v in [("model.hidden", 32), ("model.out_dim", 16), ("finetune.epochs", 2),
                           ("partition.labeled", 60), ("partition.aux", 40), ("method.options.epochs", 2),
                           ("audit.prior", "same-attack")] for a in ("--set", f"{k}={v}")]
    result = CliRunner().invoke(app, ["audit", "--method", "ssvfl-i", "--attacks", "similarity", "--defenses", "none",
                                      "--seeds", "0,1", "--jobs", "1", "--out", str(tmp_path / "o"), *sets])
    assert result.exit_code == 0, result.output
    verdicts = json.loads((tmp_path / "o" / "audit.json").read_text())["verdicts"]
    assert {(v["attack"], v["phase"], v["verdict"]) for v in verdicts} == {
        ("similarity", "pretrain", "no"), ("similarity", "finetune", "no")}


def test_auto_is_own_where_the_method_pretrains_alone_and_simsiam_elsewhere():
    from vflpriv.runner.prior import prior_pretraining

    assert RunConfig.model_validate(SMALL).attack.prior_ssl == "auto"
    resolved = {m: prior_pretraining(m, "auto") for m in ("ssvfl-i", "ssvfl-c", "local-byol", "vflhlp", "vflhlp-p",
                                                          "splitnn", "fedhssl", "oneshot")}
    assert resolved == {"ssvfl-i": "own", "ssvfl-c": "own", "local-byol": "own", "vflhlp": "own", "vflhlp-p": "own",
                        "splitnn": "simsiam", "fedhssl": "simsiam", "oneshot": "simsiam"}
    assert prior_pretraining("ssvfl-i", "simsiam") == "simsiam"


@pytest.mark.parametrize("method", [{"name": "ssvfl-i", "options": {"epochs": 2}},
                                    {"name": "vflhlp", "options": {"supervised_epochs": 2, "scarf_epochs": 1}},
                                    {"name": "vflhlp-a", "options": {"supervised_epochs": 2}}])
def test_the_cached_own_encoder_is_reused_without_a_warning(method, tmp_path, monkeypatch):
    """The stored modules match the skeleton they are loaded into: a second process (the in-process copy dropped)
    reads the cached encoder, silently and bit for bit, instead of discarding it and pretraining again."""
    import warnings

    from vflpriv.config.registry import METHODS
    from vflpriv.runner import prior as prior_module
    from vflpriv.runner.attacking import adversary_view
    from vflpriv.runner.execution import train

    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path))
    cfg = _run(phase="pretrain").model_copy(update={"method": RunConfig.model_validate({"method": method}).method})
    p = plan(cfg)
    result = train(p)
    view = adversary_view(result.fed, p.scenario, result.encoder("pretrain", p.scenario.adversary), "pretrain",
                          torch.Generator())
    monkeypatch.setattr(prior_module, "_ENCODERS", {})  # computed and stored here, whatever ran before
    first = own_encoder(p.attacks[0].prior, view)
    monkeypatch.setattr(prior_module, "_ENCODERS", {})  # as another process of the sweep
    monkeypatch.setattr(METHODS.get(method["name"]), "pretrain_alone",
                        lambda *a, **k: pytest.fail("the cached encoder was recomputed"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = own_encoder(p.attacks[0].prior, view)
    for a, b in zip(first.state_dict().values(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b)
