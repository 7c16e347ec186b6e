"""No epsilon where labels bypass the mechanism: finding 1's configuration (one-shot / few-shot VFL finetuned end to
end, whose protocol reads the clean labels before the private loop) with canaries, and a channel defense that reads
the clean labels beside dp-gaussian."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from vflpriv.cli import app
from vflpriv.common.errors import IncompatibleError
from vflpriv.config.schema import RunConfig
from vflpriv.runner.execution import build_federation, run
from vflpriv.runner.planning import plan
from vflpriv.tradeoff.epsilon import epsilon_table

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from cli_helpers import one_error_line, wrote_nothing  # noqa: E402

FAST = {"client_epochs": 1, "server_epochs": 2, "finetune_end_to_end": True}


def _finding_1(method: str, dp: dict) -> RunConfig:
    return RunConfig.model_validate({
        "partition": {"labeled": 100, "aux": 40, "canaries": 30}, "model": {"hidden": 32, "out_dim": 16},
        "finetune": {"epochs": 2}, "method": {"name": method, "options": FAST},
        "defenses": [{"name": "dp-gaussian", "sweep": True, **dp}], "attack": {"name": "gc", "prior": "none"}})


@pytest.mark.parametrize("method", ["oneshot", "fewshot"])
def test_finding_1_with_a_noise_multiplier_runs_and_records_no_claim_with_the_reason(method):
    (record,) = run(_finding_1(method, {"strength": 2.0}))
    assert record.status == "ok", record.error
    assert math.isnan(record.epsilon) and math.isnan(record.epsilon_delta)
    assert "dp-gaussian: no epsilon recorded" in record.notes and "clean labels" in record.notes
    assert record.canary_counts  # the canaries are still guessed: an empirical bound, and nothing to check it against
    table = epsilon_table(pd.DataFrame([record.to_dict()]))
    assert table["epsilon_claimed"].isna().all() and not table["testable"].any() and not table["rejected"].any()
    assert table["claim_note"].str.startswith("dp-gaussian: no epsilon recorded").all()


@pytest.mark.parametrize("method", ["oneshot", "fewshot"])
def test_finding_1_asking_for_epsilon_1_is_refused_in_planning_and_prints_no_claim(method, tmp_path, monkeypatch):
    with pytest.raises(IncompatibleError, match="target_epsilon"):
        plan(_finding_1(method, {"options": {"target_epsilon": 1.0}}))
    monkeypatch.chdir(tmp_path)
    with wrote_nothing(tmp_path):
        done = CliRunner().invoke(app, [
            "evaluate", "--method", method, "--defense", "dp-gaussian", "--set", "defenses.0.options.target_epsilon=1",
            "--canaries", "30", "--attack", "gc", "--seeds", "0", "--out", str(tmp_path / "out"),
            *(x for k, v in FAST.items() for x in ("--set", f"method.options.{k}={str(v).lower()}"))])
    assert done.exit_code == 2
    one_error_line(done.output, "its argument does not cover")


def _binary(*defenses: dict) -> RunConfig:
    return RunConfig.model_validate({
        "dataset": {"name": "breast-cancer"}, "partition": {"labeled": 80, "aux": 20},
        "model": {"hidden": 32, "out_dim": 16}, "finetune": {"epochs": 2}, "defenses": list(defenses),
        "attack": {"name": "gc", "prior": "none"}})


DP = {"name": "dp-gaussian", "strength": 2.0, "sweep": True}


def test_a_channel_defense_reading_the_clean_labels_is_refused_beside_dp_gaussian():
    with pytest.raises(IncompatibleError, match="marvell reads the active party's labels"):
        plan(_binary(DP, {"name": "marvell", "strength": 1.0}))
    plan(_binary(DP, {"name": "iso", "strength": 1.0}))  # ISO reads no label: post-processing of the noisy rows


@pytest.mark.parametrize("marvell_first", [False, True])
def test_after_a_label_defense_it_reads_the_randomised_labels_and_is_covered(marvell_first):
    """Marvell reads each batch's labels as the active party holds them when it sends, whichever was bound first."""
    label, marvell = {"name": "label-dp", "strength": 1.0}, {"name": "marvell", "strength": 1.0}
    p = plan(_binary(DP, *((marvell, label) if marvell_first else (label, marvell))))
    fed = build_federation(p)
    marvell, label_dp = (p.defenses[1], p.defenses[2]) if marvell_first else (p.defenses[2], p.defenses[1])
    known = fed.active.labels >= 0
    clean = p.scenario.dataset.y_train[known.nonzero().flatten().cpu()]
    read = marvell.federation.active.labels[known]
    assert torch.equal(read, fed.active.labels[known]) and not torch.equal(read.cpu(), clean)  # randomised ones
    assert label_dp.privacy_spent() == 1.0


def test_a_label_defense_at_its_identity_randomises_nothing_so_marvell_is_still_refused():
    with pytest.raises(IncompatibleError, match="marvell"):
        plan(_binary(DP, {"name": "label-dp"}, {"name": "marvell", "strength": 1.0}))


def test_an_own_finetune_in_a_subclass_of_a_method_declaring_its_label_uses_is_still_unknown():
    """Review rowcheck5 (F2): the rule for an undeclared own finetune sat inside label_uses, which VFLHLP overrides,
    so a VFLHLP-P subclass with its own finetune (reading the clean labels) kept dp-gaussian's epsilon 4.7285."""
    from vflpriv.defenses.dp_gaussian import GaussianDP
    from vflpriv.methods.splitnn import SplitNN
    from vflpriv.methods.vflhlp import VFLHLPPassive

    class Peek(VFLHLPPassive):
        def finetune(self, fed, pretrained):
            return super().finetune(fed, pretrained)

    class Declared(VFLHLPPassive):
        def label_uses(self):
            return super().label_uses()

        def finetune(self, fed, pretrained):
            return super().finetune(fed, pretrained)

    dp = GaussianDP.__new__(GaussianDP)  # covers() reads only the method
    for cls in (Peek, type("PeekS", (SplitNN,), {"finetune": Peek.finetune})):
        assert ".finetune()" in dp.covers(cls(cls.Options())), cls
    assert dp.covers(Declared(Declared.Options())) == ""
    assert dp.covers(VFLHLPPassive(VFLHLPPassive.Options())) == ""


def test_any_own_code_of_a_plugin_voids_the_claims_on_both_sides_unless_declared_beside_it():
    """Review rvlead F1/F2: the rule named finetune only (labels) or five methods (features), so an own
    ``fresh_bottoms``/``pretrain`` or a helper a declared method calls (VFLHLP's ``fresh_active_encoder``, ``_fresh``)
    reading the clean labels or the features kept dp-gaussian's epsilon 244.04 and embedding-dp's 438.86."""
    from vflpriv.defenses.dp_gaussian import GaussianDP
    from vflpriv.methods.splitnn import SplitNN
    from vflpriv.methods.vflhlp import VFLHLPActive, VFLHLPPassive

    def own(base, name, **extra):
        return type("Own", (base,), {name: getattr(base, name), **extra})

    dp = GaussianDP.__new__(GaussianDP)  # covers() reads only the method
    leaks = [own(SplitNN, "fresh_bottoms"), own(SplitNN, "pretrain"), own(SplitNN, "predict"),
             own(VFLHLPPassive, "fresh_active_encoder"), own(VFLHLPActive, "_fresh"),
             type("Own", (SplitNN,), {"helper": lambda self: None})]
    for cls in leaks:
        m = cls(cls.Options())
        assert "Own." in dp.covers(m) and "Own." in m.undeclared_feature_uses()[0], cls.__mro__[1]
    declared = own(VFLHLPActive, "_fresh", label_uses=VFLHLPActive.label_uses,
                   feature_uses=VFLHLPActive.feature_uses)
    m = declared(declared.Options())
    assert m.undeclared_label_uses() == m.undeclared_feature_uses() == ()
    assert dp.covers(m) == dp.covers(VFLHLPActive(VFLHLPActive.Options()))


def test_every_registered_method_declares_its_uses_beside_its_own_code():
    """The built-ins' epsilons rest on their declarations: a helper added to a method's class without its
    ``label_uses``/``feature_uses`` beside it must fail here, not silently drop the method's claim (local-a's own
    finetune and predict are undeclared on the feature side: it sends no embedding, so no feature claim is made)."""
    from vflpriv.config.registry import METHODS

    for name in METHODS.names():
        cls = METHODS.get(name)
        m = cls(cls.Options())
        assert m.undeclared_label_uses() == (), name
        assert m.undeclared_feature_uses() == () or name == "local-a", name


def test_code_the_effective_declaration_does_not_inherit_from_or_set_on_the_instance_is_undeclared():
    """Review rvlead2 G1: own_code looked at the classes before the declaring one only, so code set on the instance
    in __init__, a mixin's code after the declaring class, a declaration in a mixin before a class with code, a
    mixin's __getattribute__ and a metaclass patching the instance each kept dp-gaussian's epsilon 244.04."""
    from vflpriv.defenses.dp_gaussian import GaussianDP
    from vflpriv.methods.base import Method
    from vflpriv.methods.splitnn import SplitNN
    from vflpriv.methods.vflhlp import VFLHLPPassive

    class InitLeak(SplitNN):
        def __init__(self, options):
            super().__init__(options)
            self.fresh_bottoms = lambda fed: SplitNN.fresh_bottoms(self, fed)

    class StampPredict(Method):
        def predict(self, fed, trained, *, ids=None):
            return super().predict(fed, trained, ids=ids)

    class NoUses:
        def label_uses(self):
            return ()

        def feature_uses(self):
            return ()

    class Fresh(SplitNN):
        def fresh_bottoms(self, fed):
            return super().fresh_bottoms(fed)

    class GetAttribute:
        def __getattribute__(self, name):
            return object.__getattribute__(self, name)

    class Meta(type):
        def __call__(cls, *args, **kwargs):
            return super().__call__(*args, **kwargs)

    dp = GaussianDP.__new__(GaussianDP)  # covers() reads only the method
    for cls in (InitLeak, type("MixinLeak", (VFLHLPPassive, StampPredict), {}),
                type("DeclMixinLeak", (NoUses, Fresh), {}), type("GetAttributeLeak", (SplitNN, GetAttribute), {}),
                Meta("MetaLeak", (SplitNN,), {})):
        m = cls(cls.Options())
        assert "its own code" in dp.covers(m) and m.undeclared_feature_uses(), cls.__name__
    data_mixin = type("Consts", (), {"width": 3})
    m = type("WithData", (SplitNN, data_mixin), {})(SplitNN.Options())
    assert m.undeclared_label_uses() == m.undeclared_feature_uses() == ()  # data alone is no code


def test_a_plugin_s_own_init_supported_or_declared_is_code_the_declaration_must_cover():
    """Review fin F5: ``__init__``, ``supported`` and ``declared`` were exempt, so a plugin's ``declared()`` (called
    by the planner after dp-gaussian's coverage check) could install a label-reading ``fresh_bottoms`` on its class,
    and its ``__init__`` could patch the shared loop: dp-gaussian still printed epsilon 4.73. Declared beside them,
    they are covered again."""
    from vflpriv.defenses.dp_gaussian import GaussianDP
    from vflpriv.methods.splitnn import SplitNN

    def own(self, *args, **kwargs):  # never called here: what counts is that the class defines it
        return getattr(SplitNN, own.name)(self, *args, **kwargs)

    dp = GaussianDP.__new__(GaussianDP)
    for name in ("__init__", "supported", "declared"):
        own.name = name
        body = {name: own}
        leak = type(f"Own{name}", (SplitNN,), body)
        m = leak(SplitNN.Options())
        assert f"Own{name}.{name}()" in dp.covers(m) and m.undeclared_feature_uses(), name
        declared = type(f"Declared{name}", (SplitNN,), {**body, "label_uses": lambda self: (),
                                                         "feature_uses": lambda self: ()})
        assert declared(SplitNN.Options()).undeclared_label_uses() == (), name
