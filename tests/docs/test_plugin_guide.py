"""The plugin guide's examples run as printed (executed from docs/plugins.md), its custom-loop example is the
shipped examples/fedbcd, and that example honours the finetuning recipe exactly (split learning at Q = 1)."""

import importlib.util
import re
from pathlib import Path

import pytest

from vflpriv.config.registry import ATTACKS, DEFENSES, METHODS
from vflpriv.config.schema import RunConfig
from vflpriv.runner.execution import run

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "plugins.md"
FEDBCD = ROOT / "examples" / "fedbcd" / "vflpriv_fedbcd" / "__init__.py"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", GUIDE.read_text(), flags=re.S)


def _examples() -> dict:
    namespace: dict = {}
    for block in _blocks():
        if block.startswith(("from vflpriv", "import")):
            exec(compile(block, str(GUIDE), "exec"), namespace)  # noqa: S102 - our own documentation
    return namespace


def _fedbcd():
    spec = importlib.util.spec_from_file_location("vflpriv_fedbcd", FEDBCD)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FedBCD


TINY = {"partition": {"labeled": 100, "aux": 40}, "model": {"hidden": 64, "out_dim": 32},
        "attack": {"name": "gc", "prior": "none"}}


def test_the_guide_attack_and_defense_run_in_a_real_run():
    found = _examples()
    ATTACKS.register("guide-majority", found["MajorityOfAux"])
    DEFENSES.register("guide-sign", found["SignOnly"])
    (record,) = run(RunConfig.model_validate({
        "partition": {"labeled": 60, "aux": 20}, "model": {"hidden": 32, "out_dim": 16}, "finetune": {"epochs": 2},
        "attack": {"name": "guide-majority", "prior": "none"},
        "defenses": [{"name": "guide-sign", "strength": 0.9, "sweep": True}],
    }))
    assert record.status == "ok", record.error
    assert 0.05 <= record.attack_accuracy <= 0.2  # one label for all ten digits: about a tenth right
    assert record.strength_axis == "share"


def test_the_guide_loss_defense_acts_at_the_active_partys_loss():
    found = _examples()
    DEFENSES.register("guide-shrink", found["ShrinkEmbeddings"])
    base = {"partition": {"labeled": 100, "aux": 20}, "model": {"hidden": 32, "out_dim": 16},
            "finetune": {"epochs": 10, "batch_size": 32}, "attack": {"name": "gc", "prior": "none"}}
    plain, = run(RunConfig.model_validate(base))
    assert plain.utility > 0.3
    same, = run(RunConfig.model_validate({**base, "defenses": [{"name": "guide-shrink"}]}))
    shrunk, = run(RunConfig.model_validate({**base, "defenses": [{"name": "guide-shrink", "strength": 10.0}]}))
    assert same.utility == plain.utility  # at its identity: nothing changed
    assert shrunk.status == "ok" and shrunk.utility != plain.utility


def test_the_guide_feature_defense_acts_at_the_victim_s_loss_in_both_phases():
    found = _examples()
    DEFENSES.register("guide-quiet", found["QuietEmbeddings"])
    base = {"partition": {"labeled": 100, "aux": 20}, "model": {"hidden": 32, "out_dim": 16},
            "finetune": {"epochs": 5, "batch_size": 32}, "attack": {"name": "fi-decoder", "options": {"epochs": 5}}}
    plain, = run(RunConfig.model_validate(base))
    same, = run(RunConfig.model_validate({**base, "defenses": [{"name": "guide-quiet"}]}))
    quiet, = run(RunConfig.model_validate({**base, "defenses": [{"name": "guide-quiet", "strength": 10.0}]}))
    assert same.utility == plain.utility and same.feature_mse == plain.feature_mse  # at its identity
    assert quiet.status == "ok" and quiet.feature_mse != plain.feature_mse
    pretrained, = run(RunConfig.model_validate({**base, "method": {"name": "local-simsiam", "options": {"epochs": 1}},
                                                 "defenses": [{"name": "guide-quiet", "strength": 10.0,
                                                               "phase": "pretrain"}]}))
    assert pretrained.status == "ok", pretrained.error


def test_the_guide_aggvfl_method_is_complete_and_runs():
    found = _examples()
    METHODS.register("guide-aggvfl", found["AggVFL"])
    (record,) = run(RunConfig.model_validate({**TINY, "method": {"name": "guide-aggvfl"},
                                              "finetune": {"epochs": 10, "batch_size": 32}}))
    assert record.status == "ok", record.error
    assert record.utility > 0.5  # ten classes: far above chance (0.1)


def test_a_method_s_declared_top_and_embedding_decide_what_applies_and_are_checked_on_its_messages():
    """aggVFL declares its own top (a sum of logits) and class-logit embeddings: DLI applies to it with the default
    model.out_dim, a finetune.top it would not read is refused, and a method declaring the wrong width is refused."""
    from vflpriv.common.errors import ConformanceError, IncompatibleError
    from vflpriv.config.schema import TrainingConfig
    from vflpriv.runner.planning import plan
    from vflpriv.workflows.conformance import check_conformance

    aggvfl = _examples()["AggVFL"]
    METHODS.register("guide-aggvfl", aggvfl)
    (record,) = run(RunConfig.model_validate({**TINY, "method": {"name": "guide-aggvfl"}, "attack": {
        "name": "dli", "prior": "none"}, "finetune": {"epochs": 2, "batch_size": 32}}))
    assert record.status == "ok" and record.attack_accuracy == 1.0  # the sign rule on a sum of logits
    with pytest.raises(IncompatibleError, match="has its own top \\(sum\\), so finetune.top is not read"):
        plan(RunConfig.model_validate({**TINY, "method": {"name": "guide-aggvfl"}, "finetune": {"top": "mlp"}}))
    with pytest.raises(IncompatibleError, match="one gradient entry per class"):  # split learning: out_dim units
        plan(RunConfig.model_validate({**TINY, "attack": {"name": "dli", "prior": "none"}}))
    training = {k: v for k, v in TINY.items() if k != "attack"}
    passed = check_conformance(TrainingConfig.model_validate({**training, "method": {"name": "guide-aggvfl"},
                                                              "finetune": {"epochs": 1}}))
    assert "passive embeddings of the declared width (10 units)" in passed

    class Misdeclared(aggvfl):
        embedding = "out_dim"

    METHODS.register("guide-misdeclared", Misdeclared)
    with pytest.raises(ConformanceError, match="sends passive embeddings of 10 units, but declares 32"):
        check_conformance(TrainingConfig.model_validate({**training, "method": {"name": "guide-misdeclared"},
                                                         "finetune": {"epochs": 1}}))


def test_the_guide_custom_loop_is_the_shipped_example():
    (block,) = [b for b in _blocks() if b.startswith("class FedBCD(Method)")]
    assert block in FEDBCD.read_text()


@pytest.mark.parametrize("recipe", [{}, {"optimizer": "sgd", "lr": 0.01, "schedule": "cosine", "grad_clip": 5.0}])
def test_fedbcd_with_one_update_per_exchange_is_split_learning_bit_for_bit(recipe):
    METHODS.register("example-fedbcd", _fedbcd())
    finetune = {"epochs": 3, "batch_size": 32, **recipe}
    split, = run(RunConfig.model_validate({**TINY, "method": {"name": "splitnn"}, "finetune": finetune}))
    bcd, = run(RunConfig.model_validate({**TINY, "method": {"name": "example-fedbcd", "options": {"local_updates": 1}},
                                         "finetune": finetune}))
    assert bcd.utility == split.utility and bcd.attack_accuracy == split.attack_accuracy
    assert bcd.traffic == split.traffic


def test_fedbcd_makes_q_updates_per_exchange_with_the_messages_of_one():
    """Q updates per exchange: the same messages as split learning (one gradient per batch), and the model moves
    further per epoch (more updates on the same labels)."""
    METHODS.register("example-fedbcd", _fedbcd())
    finetune = {"epochs": 2, "batch_size": 32}
    split, = run(RunConfig.model_validate({**TINY, "method": {"name": "splitnn"}, "finetune": finetune}))
    bcd, = run(RunConfig.model_validate({**TINY, "method": {"name": "example-fedbcd", "options": {"local_updates": 5}},
                                         "finetune": finetune}))
    assert bcd.traffic == split.traffic
    assert bcd.utility > split.utility + 0.1
