"""The plugin guide's attack and defense examples run as printed (executed from docs/plugins.md)."""

import re
from pathlib import Path

from vflpriv.config import RunConfig
from vflpriv.registry import ATTACKS, DEFENSES
from vflpriv.run import run

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"


def _examples() -> dict:
    namespace: dict = {}
    for block in re.findall(r"```python\n(.*?)```", GUIDE.read_text(), flags=re.S):
        if block.startswith("from vflpriv"):
            exec(compile(block, str(GUIDE), "exec"), namespace)  # noqa: S102 - our own documentation
    return namespace


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
