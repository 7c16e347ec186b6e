"""Review fin17 / task acct: each claim is judged once when its training is recorded (its accounting run once, the
same verdict for the notes, the record's epsilon and its accounting entries)."""

from __future__ import annotations

import vflpriv.defenses.dp_gaussian as dp_gaussian
from vflpriv.config.sweep import ExperimentConfig
from vflpriv.runner.execution import run

BASE = {"partition": {"labeled": 60, "aux": 20}, "model": {"hidden": 32, "out_dim": 16}, "finetune": {"epochs": 1},
        "seeds": [0], "attack": {"name": "mc", "prior": "none"}}


def _run(*defenses: dict, strength: float = 0.5, **finetune):
    """The one run of ``defenses`` (the swept one at ``strength``) on BASE, with ``finetune``'s settings."""
    config = {**BASE, "finetune": {**BASE["finetune"], **finetune}, "defenses": list(defenses), "strengths": [strength]}
    return ExperimentConfig.model_validate(config).runs()[0]


def test_a_claim_is_judged_once_when_its_training_is_recorded(monkeypatch):
    """Its accountant ran up to twice (``claimed``, and ``accounting_of``'s ``claimed([d])``)."""
    calls = []
    real = dp_gaussian.spent
    monkeypatch.setattr(dp_gaussian, "spent", lambda *a, **k: calls.append(k["uses"]) or real(*a, **k))
    (record,) = run(_run({"name": "dp-gaussian", "sweep": True}))
    assert calls == [1] and record.epsilon == real(0.5, delta=1e-5, uses=1)
