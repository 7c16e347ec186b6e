"""Review rc3's findings on embedding-dp's claim (issue 47): each a configuration that printed a feature epsilon the
written argument does not cover, made small."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

from vflpriv.common.errors import ProtocolError
from vflpriv.config.schema import RunConfig
from vflpriv.defenses.own_modules import foreign_part
from vflpriv.engine.hooks import DefenseChain
from vflpriv.defenses.per_sample import GhostTape, ghost_applies
from vflpriv.defenses.private_rows import PrivateRows
from vflpriv.engine import ACTIVE, EMBEDDING, FINETUNE, Message
from vflpriv.methods.splitnn import SplitNN
from vflpriv.runner.execution import run

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "methods"))
from pretrain_helpers import build_federation  # noqa: E402
from test_embedding_dp import _config  # noqa: E402
from test_embedding_dp_premise import _prepend  # noqa: E402


def test_a_victim_the_defense_does_not_guard_gets_no_feature_epsilon():
    """F7: embedding-dp guards party 1, the attack targets party 2, whose features no mechanism touched."""
    c = _config(sigma=4.0, epochs=1).model_dump(mode="json")
    c["partition"]["parties"], c["defenses"][0]["party"], c["attack"]["victim"] = 4, 1, 2
    (record,) = run([RunConfig.model_validate(c)])
    assert record.status == "ok", record.error
    assert math.isnan(record.epsilon_features) and math.isnan(record.epsilon_features_delta)
    assert "no feature epsilon at victim 2" in record.notes


def test_a_finetuning_release_without_sample_ids_voids_the_training_epsilon():
    """F8: a victim's finetuning embedding without ids was dropped from the counts; now it fails closed."""
    p, fed = build_federation(_config(sigma=4.0, epochs=1))
    dp = p.defenses[0]
    p.method.finetune(fed, None)
    assert dp.privacy_spent() is not None
    x = fed.parties[1].x_train[:5].flatten(1)
    fed.channel.send(Message(EMBEDDING, FINETUNE, 1, ACTIVE, x, None, 9))
    assert dp.privacy_spent() is None and "without sample ids" in dp.uncovered


def test_a_16_bit_bottom_is_noised_in_float32_so_its_output_grid_does_not_reveal_the_row():
    """F6: noise added in bfloat16 lands on a grid that depends on the signal: an output in (0, 2^-12) came only from
    row 0, never from row 0.5 (Mironov 2012). Noised in float32 and rounded back, both rows produce such outputs."""
    def fine(signal: float) -> int:
        rows = PrivateRows(nn.Identity(), clip=1.0, sigma=1.0, frozen=True, generator=torch.Generator().manual_seed(1))
        y = rows.eval()(torch.full((200_000, 1), signal, dtype=torch.bfloat16))
        assert y.dtype == torch.bfloat16  # what is sent keeps the bottom's dtype
        return int(((y != 0) & (y.float().abs() < 2.0 ** -12)).sum())
    assert fine(0.0) > 10 and fine(0.5) > 10


def test_batchnorm_without_running_statistics_is_not_admitted():
    """F3: it normalises with the batch's statistics in eval mode too (embedding-dp's freezing is eval())."""
    assert foreign_part(nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))) == ""
    assert "without running statistics" in foreign_part(nn.Sequential(nn.BatchNorm1d(4, track_running_stats=False)))


def test_releases_no_update_checked_get_no_epsilon(monkeypatch):
    """F3: a frozen bottom makes no update, so the rows check never ran; its releases were charged at sensitivity 2C
    on an untested premise."""
    wrap = DefenseChain.passive_bottom  # where the training hands the defenses its bottoms (final14 F5)
    monkeypatch.setattr(DefenseChain, "passive_bottom",
                        lambda self, party, b: wrap(self, party, b.requires_grad_(False)))
    p, fed = build_federation(_config(sigma=4.0, epochs=1))
    dp = p.defenses[0]
    p.method.finetune(fed, None)
    assert dp.uses() > 0 and dp.privacy_spent() is None and "rows check" in dp.uncovered


def test_only_vflpriv_classes_whose_forward_was_read_are_admitted():
    """F5: PooledEstimator is vflpriv's, but its forward is a lookup fitted on the training set: not admitted."""
    from vflpriv.methods.centralized import PooledEstimator
    from vflpriv.models.encoders import MLPEncoder  # noqa: F401  (loaded: the allowlist matches it by identity)

    assert "PooledEstimator" in foreign_part(nn.Sequential(nn.Flatten(1), PooledEstimator(None, 4)))


class _CentredInit(SplitNN):
    def fresh_bottoms(self, fed):
        return super().fresh_bottoms(fed)


class _Declared(_CentredInit):
    def feature_uses(self):
        return ()


def test_an_overridden_bottom_builder_is_an_unknown_feature_use():
    """F5: a plugin overriding only fresh_bottoms (a bias centred on the victim's features) kept the epsilon."""
    assert SplitNN(None).feature_uses() == ()
    assert "fresh_bottoms()" in _CentredInit(None).undeclared_feature_uses()[0]
    assert _Declared(None).feature_uses() == _Declared(None).undeclared_feature_uses() == ()


def test_a_callable_an_admitted_module_holds_itself_is_foreign_to_the_rule_and_the_tape():
    """F2: a function given as LocalEncoder's bottom, or a module hidden from named_modules, was never looked at."""
    from vflpriv.methods.towers import LocalEncoder

    gate = LocalEncoder(lambda x: x - x.mean(0), nn.Identity(), 4)
    hidden = nn.Sequential(nn.Linear(4, 4))
    object.__setattr__(hidden, "centre", nn.Identity())
    assert foreign_part(LocalEncoder(nn.Linear(4, 4), nn.Identity(), 4)) == ""
    for bottom, name in ((gate, "bottom"), (hidden, "centre")):
        assert name in foreign_part(bottom) and not ghost_applies(bottom)


@pytest.mark.parametrize(("bottom", "off"), [
    (nn.Sequential(nn.Unflatten(0, (1, -1)), nn.Conv2d(1, 1, (3, 1), padding=(1, 0)), nn.Flatten(0, 1)), "Unflatten"),
    (nn.Sequential(nn.Unflatten(1, (1, 4)), nn.Conv2d(5, 5, 1), nn.Flatten(1)), "Conv2d"),  # the batch as channels
    (nn.Sequential(nn.Flatten(-2), nn.Unflatten(0, (5, 4))), "Flatten"),  # start_dim -2: 0 on (5, 4)
    (nn.LayerNorm((5, 4)), "LayerNorm"),  # over the batch axis too
    (nn.Sequential(nn.Unflatten(1, (1, 2, 2)), nn.Conv2d(1, 2, 1), nn.BatchNorm2d(2), nn.Flatten(1)), None),
])
def test_admitted_layers_are_checked_per_call_not_per_type(bottom, off):
    """F1: each layer on the list, called so that the batch axis becomes a channel, a spatial axis or a normalised
    one, mixed rows for values the batch lacks; the type alone admitted it."""
    rows = PrivateRows(bottom, clip=1.0, sigma=1.0, frozen=True, generator=torch.Generator().manual_seed(0)).eval()
    rows(torch.rand(5, 4))
    assert (off in rows.misread) if off else rows.misread == ""


def test_a_bottom_calling_an_admitted_layer_across_the_batch_gets_no_epsilon(monkeypatch):
    """F1 end to end: digits' half image read as one unbatched image whose height is the batch; an epsilon was
    printed."""
    def make(bottom):  # row i gets relu(x[i-1] + x[i+1] - 50): mixing only for values the batch lacks
        conv1, conv2 = nn.Conv2d(1, 3, (3, 1), padding=(1, 0)), nn.Conv2d(3, 1, 1, bias=False)
        with torch.no_grad():
            conv1.weight.zero_(), conv1.bias.copy_(torch.tensor([0.0, 0.0, -50.0]))
            conv1.weight[:2, 0, 1, 0] = torch.tensor([1.0, -1.0])  # relu(x) - relu(-x) = x
            conv1.weight[2, 0, [0, 2], 0] = 1.0
            conv2.weight.copy_(torch.tensor([1.0, -1.0, 1.0]).view(1, 3, 1, 1))
        return nn.Sequential(nn.Flatten(1), nn.Unflatten(0, (1, -1)), conv1.requires_grad_(False), nn.ReLU(),
                             conv2.requires_grad_(False), nn.Flatten(0, 1), nn.Unflatten(1, (1, 8, 4)))
    _prepend(monkeypatch, make)
    p, fed = build_federation(_config(sigma=4.0, epochs=1))
    p.method.finetune(fed, None)
    assert p.defenses[0].privacy_spent() is None and "Unflatten" in p.defenses[0].uncovered


def _centre_wrapper_input(module, args):
    if isinstance(module, PrivateRows) and module.training:
        return (args[0] - args[0].mean(0, keepdim=True),)


def _mix_real_weights_only(module, args, out):
    if isinstance(module, nn.Linear) and type(module.weight) is nn.Parameter and out.dim() == 2 and out.shape[0] > 1:
        return out + out.mean(0, keepdim=True).detach()


@pytest.mark.parametrize(("register", "hook", "why"), [
    (register_module_forward_pre_hook, _centre_wrapper_input, "another input than its batch"),
    (register_module_forward_hook, _mix_real_weights_only, "changed when other rows"),
])
def test_an_ungated_hook_the_probes_did_not_run_through_fails_the_run(register, hook, why):
    """F4b: a pre-hook on embedding-dp's wrapper (the probes ran the inner bottom); F4c: a hook acting only on real
    nn.Parameter weights (the probes handed plain tensors). Both printed the epsilon."""
    p, fed = build_federation(_config(sigma=4.0, epochs=1))
    handle = register(hook)
    try:
        with pytest.raises(ProtocolError, match=why):
            p.method.finetune(fed, None)
    finally:
        handle.remove()


def test_a_weight_used_outside_its_layer_call_is_found_on_the_graph():
    """GhostTape._reused finds each parameter's accumulator by the public get_gradient_edge (node.variable is not
    documented): a second use of the weight adds an edge, and the tape leaves the update to torch.func."""
    bottom = nn.Sequential(nn.Linear(3, 3))
    tape, x = GhostTape(bottom), torch.randn(4, 3)
    with tape:
        rows = bottom(x)
    assert tape._reused(rows.sum()) == ""
    assert "reached by 2 edges" in tape._reused((rows + x @ bottom[0].weight.t()).sum())
