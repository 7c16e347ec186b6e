"""The audit: its grid lists what cannot run, conformance refuses methods that break the contract, and an
installed third-party plugin is found through its entry point and audited end to end."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from vflpriv.common.errors import ConformanceError
from vflpriv.config.registry import METHODS
from vflpriv.config.schema import TrainingConfig
from vflpriv.engine import EMBEDDING, FINETUNE, INFERENCE
from vflpriv.methods import Trained
from vflpriv.methods.splitnn import SplitNN
from vflpriv.store.sqlite import read_store
from vflpriv.tradeoff.leakage import SAMPLE_TEST_NAME, leakage_test
from vflpriv.workflows.audit import AUTO_SHARE, AuditConfig, audit_grid, canaries
from vflpriv.workflows.conformance import check_conformance

ROOT = Path(__file__).resolve().parents[2]
SMALL = {"model": {"hidden": 32, "out_dim": 16}, "finetune": {"epochs": 2, "batch_size": 32},
         "partition": {"labeled": 60, "aux": 20}}


def test_grid_lists_every_pair_that_cannot_run_with_the_reason():
    cfg = AuditConfig.model_validate({**SMALL, "method": {"name": "splitnn"}, "seeds": [0, 1],
                                      "audit": {"defenses": [{"name": "iso"}, {"name": "marvell"}], "canaries": 0}})
    runs, skipped = audit_grid(cfg)
    reasons = {(s.attack, s.defense): s.reason for s in skipped}
    assert "needs a binary task" in reasons[("norm", "none")] and "needs a binary task" in reasons[("*", "marvell")]
    assert "needs a binary task" in reasons[("exploit", "none")]
    assert "one gradient entry per class" in reasons[("dli", "none")] and "finetune.top=sum" in reasons[("dli", "none")]
    attacks = {r.attack.name for r in runs}
    assert attacks == {"mc", "mc-mixmatch", "gc", "similarity", "mc-active", "fi-decoder", "fi-inversion", "grn"}
    assert "left out of the default audit: under a trained top" in reasons[("bli", "none")]
    # per seed: undefended + 3 ISO strengths, once for the passive attacks and once more for mc-active, which acts; the
    # feature attacks share the passive attacks' trainings
    assert len({r.training_key() for r in runs}) == 2 * (1 + 3) * 2
    active = {r.training_key() for r in runs if r.attack.name == "mc-active"}
    assert not active & {r.training_key() for r in runs if r.attack.name != "mc-active"}
    assert {r.attack.options.get("iterations") for r in runs if r.attack.name == "mc-mixmatch"} == {12}


def test_bli_is_left_out_of_the_default_battery_under_a_trained_top_and_runs_when_named_or_under_a_sum_top():
    """It scores below the prior in every default audit under a trained top: left out with the reason (the audit
    prints it), run where its gradient matching recovers the labels (finetune.top=sum) or where the user names it."""
    base = {**SMALL, "method": {"name": "splitnn"}, "seeds": [0]}

    def grid(**changes) -> tuple[set[str], dict]:
        runs, skipped = audit_grid(AuditConfig.model_validate({**base, **changes}))
        return {r.attack.name for r in runs}, {s.attack: s for s in skipped}

    attacks, skipped = grid(audit={"defenses": [{"name": "none"}]})
    assert "bli" not in attacks and skipped["bli"].left_out and "finetune.top=sum" in skipped["bli"].reason
    assert not skipped["dli"].left_out  # inapplicable, not left out
    attacks, _ = grid(audit={"defenses": [{"name": "none"}]}, finetune={**SMALL["finetune"], "top": "sum"})
    assert "bli" in attacks
    attacks, skipped = grid(audit={"defenses": [{"name": "none"}], "attacks": ["bli", "gc"]})
    assert attacks == {"bli", "gc"} and not skipped


def test_canaries_go_where_the_attacked_phase_reads_labels_and_one_training_per_seed_measures_their_cost():
    cfg = AuditConfig.model_validate({**SMALL, "method": {"name": "fedhssl"}, "seeds": [0, 1],
                                      "audit": {"attacks": ["mc", "gc"], "defenses": [{"name": "iso"}]}})
    assert canaries(cfg) == SMALL["partition"]["labeled"] // AUTO_SHARE
    runs, _ = audit_grid(cfg)
    planted = {(r.attack.phase, r.partition.canaries) for r in runs}
    assert planted == {("finetune", canaries(cfg)), ("finetune", 0), ("pretrain", 0)}  # a label-free pretraining: none
    cost = [r for r in runs if r.attack.phase == "finetune" and r.partition.canaries == 0]
    assert len(cost) == 2 and all(not r.defenses for r in cost)
    none = AuditConfig.model_validate({**SMALL, "method": {"name": "centralized-lr"}})
    assert canaries(none) == 0


def test_grid_of_a_pretraining_method_attacks_both_phases():
    cfg = AuditConfig.model_validate({**SMALL, "method": {"name": "fedhssl"}, "seeds": [0],
                                      "audit": {"attacks": ["mc", "gc"], "defenses": [{"name": "iso"}]}})
    runs, skipped = audit_grid(cfg)
    assert {(r.attack.name, r.attack.phase) for r in runs} == {("mc", "finetune"), ("mc", "pretrain"), ("gc", "finetune")}
    assert any(s.attack == "gc" and s.phase == "pretrain" and "gradient messages" in s.reason for s in skipped)
    pretrain_iso = {r.swept.strength for r in runs if r.swept and r.swept.phase == "pretrain"}
    assert pretrain_iso == {0.1, 0.4, 1.0}


class _Undeclared(SplitNN):
    sends = frozenset({("passive", EMBEDDING, FINETUNE), ("passive", EMBEDDING, INFERENCE)})  # no gradients


class _NoSnapshot(SplitNN):
    def finetune(self, fed, pretrained):
        trained = super().finetune(fed, pretrained)
        return Trained([], trained.top)


@pytest.mark.parametrize(("cls", "needle"), [(_Undeclared, "does not declare"), (_NoSnapshot, "no adversary snapshot")])
def test_conformance_refuses_a_method_breaking_the_contract(cls, needle):
    METHODS.register(f"test-{cls.__name__}", cls)
    with pytest.raises(ConformanceError, match=needle):
        check_conformance(TrainingConfig.model_validate({**SMALL, "method": {"name": f"test-{cls.__name__}"}}))


class _LabelsToPassive(SplitNN):
    """Hands the passive party the labels' mean outside the channel, and nothing of the active party's features."""

    @staticmethod
    def leaked(fed):
        return fed.active.labels[fed.active.label_ids].float().mean()

    def finetune(self, fed, pretrained):
        trained = super().finetune(fed, pretrained)
        with torch.no_grad():
            next(trained.bottoms[1].parameters()).add_(self.leaked(fed))
        return trained


def test_conformance_refuses_labels_reaching_a_passive_party_without_the_channel():
    """The label check on its own: the active party's features never leave it here, its labels do."""
    METHODS.register("test-labels-to-passive", _LabelsToPassive)
    with pytest.raises(ConformanceError, match="lets the active party's data reach passive party 1's model"):
        check_conformance(TrainingConfig.model_validate({**SMALL, "method": {"name": "test-labels-to-passive"}}))


def test_conformance_refuses_labels_reaching_a_passive_party_on_two_classes():
    """The altered run shifts every label to the next class: on a binary task too, where a shift by two would be none."""
    METHODS.register("test-labels-to-passive", _LabelsToPassive)
    binary = {**SMALL, "dataset": {"name": "breast-cancer"}, "partition": {"labeled": 60, "aux": 10}}
    with pytest.raises(ConformanceError, match="lets the active party's data reach passive party 1's model"):
        check_conformance(TrainingConfig.model_validate({**binary, "method": {"name": "test-labels-to-passive"}}))


class _FeaturesToPassive(_LabelsToPassive):
    """Hands the passive party the mean of the active party's features of its labeled samples outside the channel,
    no labels."""

    @staticmethod
    def leaked(fed):
        return fed.active.x_train[fed.labeled_aligned()].float().mean()


def test_conformance_refuses_the_active_party_s_features_reaching_a_passive_party():
    """The feature half of the altered run on its own: the active party's features move, its labels are not read."""
    METHODS.register("test-features-to-passive", _FeaturesToPassive)
    with pytest.raises(ConformanceError, match="lets the active party's data reach passive party 1's model"):
        check_conformance(TrainingConfig.model_validate({**SMALL, "method": {"name": "test-features-to-passive"}}))


def test_conformance_refuses_a_side_path_of_the_passive_features():
    """The rolled run moves each passive party's features to other samples: leaky-split's top reads them directly."""
    METHODS.register("test-leaky-split", _example_method("leaky-split", "vflpriv_leaky_split", "LeakySplit"))
    with pytest.raises(ConformanceError, match="lets the passive parties' features reach the active party's"):
        check_conformance(TrainingConfig.model_validate({**SMALL, "method": {"name": "test-leaky-split"},
                                                         "finetune": {"epochs": 1, "batch_size": 32}}))


@pytest.mark.parametrize("returned", [None, "one", "not modules"])
def test_conformance_refuses_a_pretraining_without_an_encoder_per_party(returned):
    from vflpriv.methods.local_ssl import LocalSimSiam

    class BadPretraining(LocalSimSiam):
        def pretrain(self, fed):
            encoders = super().pretrain(fed)
            return {None: None, "one": encoders[:1], "not modules": [encoders[0], "encoder"]}[returned]

    METHODS.register("test-bad-pretraining", BadPretraining)
    config = {**SMALL, "method": {"name": "test-bad-pretraining", "options": {"epochs": 1}}}
    with pytest.raises(ConformanceError, match="its pretrain\\(\\) returned no encoder per party"):
        check_conformance(TrainingConfig.model_validate(config))


#: One pass of every budget a method has: the checks train each method three times.
QUICK = {"epochs": 1, "global_iterations": 1, "local_epochs": 1, "pretrain_epochs": 1, "ssl_epochs": 1,
         "client_epochs": 1, "server_epochs": 1, "kmeans_restarts": 1}


@pytest.mark.parametrize("name", [n for n in METHODS.names() if n not in ("fedhssl-simsiam",)])
def test_conformance_passes_every_built_in_method_in_both_directions(name):
    fields = METHODS.get(name).Options.model_fields
    opts = {k: v for k, v in QUICK.items() if k in fields}
    passed = check_conformance(TrainingConfig.model_validate({**SMALL, "method": {"name": name, "options": opts}}))
    if METHODS.get(name).federated:
        assert any("passive parties only through the channel" in p for p in passed)


def _example_method(package: str, module: str, attr: str):
    spec = importlib.util.spec_from_file_location(module, ROOT / "examples" / package / module / "__init__.py")
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return getattr(loaded, attr)


def test_conformance_refuses_a_passive_party_training_on_the_active_partys_own_gradient():
    """The mirror image of a side path: the passive party backpropagates the gradient the active party computed
    instead of the payload the channel delivered, so a gradient defense would be silently off."""
    METHODS.register("test-gradient-bypass", _example_method("gradient-bypass", "vflpriv_gradient_bypass",
                                                             "GradientBypass"))
    with pytest.raises(ConformanceError, match="active party's data reach passive party 1's model .* finetuning"):
        check_conformance(TrainingConfig.model_validate({**SMALL, "method": {"name": "test-gradient-bypass"}}))


def test_the_bypass_is_what_the_check_says_a_gradient_defense_is_silently_off():
    """What the refusal protects against, measured: under heavy ISO noise the bypassing method's passive bottom is
    the one an undefended training gives (it never saw the noise), while split learning's is not."""
    METHODS.register("test-gradient-bypass", _example_method("gradient-bypass", "vflpriv_gradient_bypass",
                                                             "GradientBypass"))
    from vflpriv.runner.execution import build_federation
    from vflpriv.runner.planning import plan_training

    def passive_bottom(strength: float) -> torch.Tensor:
        config = TrainingConfig.model_validate({**SMALL, "method": {"name": "test-gradient-bypass"},
                                                "defenses": [{"name": "iso", "strength": strength}]})
        p = plan_training(config)
        fed = build_federation(p)
        trained = p.method.finetune(fed, None)
        return torch.cat([t.flatten() for t in trained.bottoms[1].state_dict().values()])

    assert torch.equal(passive_bottom(0.0), passive_bottom(25.0))


@pytest.fixture(scope="module")
def plugins(tmp_path_factory) -> dict:
    """The example plugin packages pip-installed into a folder of their own, found through PYTHONPATH."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target",
                    str(target), *(str(ROOT / "examples" / name) for name in ("aggvfl", "fedbcd", "leaky-split", "gradient-bypass"))],
                   check=True, capture_output=True)
    return dict(os.environ, PYTHONPATH=str(target), VFLPRIV_CACHE=str(tmp_path_factory.mktemp("cache")))


def _vflpriv(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vflpriv", *args], capture_output=True, text=True, env=env, timeout=600)


def test_an_installed_plugin_is_found_through_its_entry_point_and_audited(plugins, tmp_path):
    assert "aggvfl" in _vflpriv(["list", "methods"], plugins).stdout.split()
    fast = ["--set", "model.hidden=32", "--set", "model.out_dim=16", "--set", "finetune.epochs=3",
            "--set", "partition.labeled=100", "--set", "partition.aux=40", "--set", "audit.prior_epochs=10"]
    done = _vflpriv(["audit", "--method", "aggvfl", "--attacks", "mc,gc", "--defenses", "iso", "--seeds", "0,1",
                     "--out", str(tmp_path), "--jobs", "1", "--canaries", "0", *fast], plugins)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "audit.json").read_text())
    assert report["method"] == "aggvfl"
    verdicts = {v["attack"]: v for v in report["verdicts"]}
    assert {"mc", "gc"} <= set(verdicts) <= {"mc", "gc", "worst-case"}
    records = pd.DataFrame([r.to_dict() for r in read_store(tmp_path / "results.sqlite").records])
    for attack in ("mc", "gc"):  # each verdict is the test of its own records, per target, over both seeds
        test = leakage_test(records[(records["attack"] == attack) & (records["defense"] == "none")])
        assert test.test == SAMPLE_TEST_NAME and test.n_seeds == 2
        assert (verdicts[attack]["verdict"], verdicts[attack]["leakage"]) == (test.verdict, pytest.approx(test.leakage))
    trained = [a for a in ("mc", "gc") if verdicts[a]["verdict"] != "attack failed"]
    assert ("worst-case" in verdicts) == (len(trained) == 2)  # a worst case over attacks that trained, or none
    if len(trained) == 2:
        strongest = max(trained, key=lambda a: verdicts[a]["leakage"])
        assert (verdicts["worst-case"]["strongest"], verdicts["worst-case"]["verdict"]) == (
            strongest, verdicts[strongest]["verdict"])
    assert {(d["attack"], d["defense"]) for d in report["defenses"]} == {("mc", "iso"), ("gc", "iso"), ("worst-case", "iso")}
    assert any(c["kind"] == "gradient" and c["messages"] > 0 for c in report["communication"])
    assert "leaks beyond the adversary's prior" in (tmp_path / "audit.md").read_text()


def test_a_plugin_with_a_side_path_around_the_channel_is_refused(plugins, tmp_path):
    refused = _vflpriv(["audit", "--method", "leaky-split", "--check-only", "--set", "finetune.epochs=1"], plugins)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith("error: refused: method 'leaky-split' lets the passive parties' features")
    assert len(refused.stderr.strip().splitlines()) == 1


def test_a_plugin_training_on_the_clean_gradient_is_refused(plugins):
    refused = _vflpriv(["audit", "--method", "gradient-bypass", "--check-only", "--set", "finetune.epochs=1"], plugins)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith("error: refused: method 'gradient-bypass' lets the active party's data reach")
    assert len(refused.stderr.strip().splitlines()) == 1


def test_the_custom_loop_example_is_described_from_its_options_and_passes_conformance(plugins):
    described = _vflpriv(["describe", "fedbcd"], plugins)
    assert described.returncode == 0, described.stderr
    assert "local_updates" in described.stdout and "updates per exchange" in described.stdout
    checked = _vflpriv(["audit", "--method", "fedbcd", "--check-only", "--set", "finetune.epochs=1"], plugins)
    assert checked.returncode == 0, checked.stderr
    assert "passive parties only through the channel" in checked.stdout


def test_canaries_go_into_a_pretraining_of_undeclared_plugin_code(monkeypatch):
    """Review eps2 G6: a FedHSSL subclass whose own ``pretrain`` declares no ``label_uses`` may read the labels: the
    audit plants canaries in its pretraining too (as its pretraining key has it: ``own_code``), and planning admits
    them there."""
    from vflpriv.methods.fedhssl import FedHSSL

    class Peeking(FedHSSL):
        def pretrain(self, fed):
            return super().pretrain(fed)

    monkeypatch.setitem(METHODS._extra, "t-peeking-hssl", Peeking)  # gone after the test
    cfg = AuditConfig.model_validate({**SMALL, "method": {"name": "t-peeking-hssl"}, "seeds": [0],
                                      "audit": {"attacks": ["mc"], "defenses": [{"name": "none"}]}})
    runs, skipped = audit_grid(cfg)
    assert ("pretrain", canaries(cfg)) in {(r.attack.phase, r.partition.canaries) for r in runs}, skipped
