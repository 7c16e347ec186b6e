"""A ProtocolError from training names whoever broke the protocol: the method for its own undeclared messages (the
channel's ChannelViolation, prefixed with the method's name and class), and not the method for an auditor's
forbidden read (the auditor's error already names its class)."""

from __future__ import annotations

import pytest
import torch

import vflpriv.auditors.gradient_lrt as gradient_lrt
from vflpriv.common.errors import ChannelViolation, ProtocolError
from vflpriv.config.registry import AUDITORS, METHODS
from vflpriv.config.schema import RunConfig
from vflpriv.engine.hooks import AuditRead
from vflpriv.engine.message import EMBEDDING, FINETUNE, INFERENCE
from vflpriv.methods.splitnn import SplitNN
from vflpriv.runner.execution import run

SMALL = {"partition": {"labeled": 60, "aux": 20}, "model": {"hidden": 16, "out_dim": 8},
         "finetune": {"epochs": 1, "batch_size": 32}, "attack": {"name": "mc", "prior": "none"}}


class _Undeclared(SplitNN):
    sends = frozenset({("passive", EMBEDDING, FINETUNE), ("passive", EMBEDDING, INFERENCE)})  # no gradients


class _Leaky(gradient_lrt.GradientLRT):
    """Asks for every row of each update, canaries included."""

    def audit_update(self, update):
        read = super().audit_update(update)
        return None if read is None else AuditRead(torch.arange(update.ids.numel()), read.released)


def test_the_method_s_own_undeclared_message_names_the_method():
    METHODS.register("test-blame-undeclared", _Undeclared)
    try:
        with pytest.raises(ChannelViolation) as caught:
            run(RunConfig.model_validate({**SMALL, "method": {"name": "test-blame-undeclared"}}))
    finally:
        METHODS._extra.pop("test-blame-undeclared")
    assert str(caught.value).startswith("method 'test-blame-undeclared'") and "does not declare" in str(caught.value)


def test_an_auditor_s_forbidden_read_is_not_blamed_on_the_method():
    AUDITORS.register("test-blame-leaky", _Leaky)
    try:
        config = RunConfig.model_validate({
            **SMALL, "partition": {"labeled": 200, "aux": 40, "canaries": 60, "aligned_fraction": 0.5},
            "finetune": {"epochs": 1, "batch_size": 32, "auditor": "test-blame-leaky"},
            "attack": {"name": "gc", "prior": "none"},
            "defenses": [{"name": "dp-gaussian", "strength": 2.0, "sweep": True}]})
        with pytest.raises(ProtocolError) as caught:
            run(config)
    finally:
        AUDITORS._extra.pop("test-blame-leaky")
    assert not isinstance(caught.value, ChannelViolation)
    assert str(caught.value).startswith("auditor ") and "method 'splitnn'" not in str(caught.value), caught.value
