"""The likelihood-ratio auditor at its edges (the survivors of ``auditors/gradient_lrt.py``'s mutation session): its
guess and confidence are each canary's posterior over the classes, and it reads the rows sent to every passive party
(a federation of four parties)."""

from __future__ import annotations

import math

import pytest
import torch

from vflpriv.auditors.gradient_lrt import GradientLRT
from vflpriv.config.schema import RunConfig
from vflpriv.runner.execution import run


def test_a_guess_is_the_class_of_largest_score_its_confidence_that_class_s_posterior():
    auditor = GradientLRT(None)
    auditor.scores = torch.tensor([[0.0, 1.0, 3.0], [2.0, 0.0, 0.0]], dtype=torch.float64)
    guess, confidence = auditor.guesses()
    assert guess.tolist() == [2, 0]
    e = math.e
    assert confidence.tolist() == pytest.approx([e**3 / (1 + e + e**3), e**2 / (e**2 + 2)])


def test_the_auditor_reads_the_rows_sent_to_every_passive_party():
    cfg = RunConfig.model_validate({
        "partition": {"parties": 4, "labeled": 200, "aux": 40, "canaries": 50, "aligned_fraction": 0.5},
        "model": {"hidden": 16, "out_dim": 8}, "finetune": {"epochs": 1, "batch_size": 32, "auditor": "gradient-lrt"},
        "attack": {"name": "gc", "prior": "none"}, "defenses": [{"name": "dp-gaussian", "strength": 0.5, "sweep": True}]})
    (record,) = run(cfg)
    assert record.status == "ok" and record.auditor_accuracy > 0.5  # little noise: most canaries' labels are read
