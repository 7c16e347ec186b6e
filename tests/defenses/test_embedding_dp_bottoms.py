"""embedding-dp's DP-SGD on bottoms its ghost-clipping rules do not cover exactly (an extra parameter, a tied weight,
a module reached twice, a subclass, a frozen bottom; the review's five: reshaped rows, a weight used outside its layer,
a hook, an overridden ``_conv_forward``, a layer looped while another is never called): each update equals a naive
per-sample autograd loop (``dp_sgd_helpers``); the built-in bottoms keep the tape. The noise and the update as a
training step: test_embedding_dp_updates.py; rows mixed: test_embedding_dp_rows.py."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from vflpriv.common.errors import ProtocolError
from vflpriv.config.schema import ModelConfig
from vflpriv.data.base import PartySpec
from vflpriv.defenses import embedding_dp, per_sample
from vflpriv.models.encoders import build_encoder

from dp_sgd_helpers import assert_naive, naive, step  # noqa: E402  (tests/defenses is on the path)


class _Tempered(nn.Linear):
    """A Linear (its forward kept) with one more trainable parameter, which scales its output through a hook."""

    def __init__(self, *shape):
        super().__init__(*shape)
        self.temperature = nn.Parameter(torch.full((shape[1],), 1.5))
        self.register_forward_hook(lambda m, i, out: out * m.temperature)


class _Plain(nn.Linear):
    """A subclass the rules cover as a Linear (its forward kept)."""


class _Doubled(nn.Linear):
    """A subclass with a forward of its own: the Linear rule would give half its gradient."""

    def forward(self, x):
        return 2 * super().forward(x)


def _tied():
    first, second = nn.Linear(6, 6, bias=False), nn.Linear(6, 6)
    second.weight = first.weight
    return nn.Sequential(first, nn.Tanh(), second)


def _twice():
    layer = nn.Linear(6, 6)
    return nn.Sequential(layer, nn.Tanh(), layer)


def _extra():
    layer = nn.Linear(5, 6)  # a plain Linear, one more trainable parameter registered on it
    layer.register_parameter("temperature", nn.Parameter(torch.full((6,), 1.5)))
    layer.register_forward_hook(lambda m, i, out: out * m.temperature)
    return nn.Sequential(nn.Linear(6, 5), nn.ReLU(), layer)


BOTTOMS = {
    "an extra trainable parameter on a plain Linear": _extra,
    "an extra trainable parameter on a Linear subclass": lambda: nn.Sequential(nn.Linear(6, 5), nn.ReLU(), _Tempered(5, 6)),
    "a weight tied across two layers": _tied,
    "one Linear reached twice": _twice,
    "a Linear subclass keeping its forward": lambda: nn.Sequential(_Plain(6, 7), nn.Tanh(), _Plain(7, 6)),
    "a Linear subclass with a forward of its own": lambda: nn.Sequential(nn.Linear(6, 7), nn.Tanh(), _Doubled(7, 6)),
}


@pytest.mark.parametrize("build", BOTTOMS.values(), ids=BOTTOMS.keys())
def test_every_trainable_parameter_gets_the_naive_loop_s_clipped_noised_update(build):
    """Whatever the bottom, every trainable parameter's update is the naive loop's (so the clipping is joint over all
    of them and the noise is the one epsilon describes), and the bottom keeps its own parameter objects."""
    assert_naive(build, (9, 6), 6)


class _Tokenwise(nn.Module):
    """(a) One Linear applied to each of k tokens of a sample: its input has n k rows, not n."""

    def __init__(self, k: int = 3, d: int = 2):
        super().__init__()
        self.k, self.d, self.fc = k, d, nn.Linear(d, 2)

    def forward(self, x):
        return self.fc(x.reshape(x.shape[0] * self.k, self.d)).reshape(x.shape[0], -1)


class _TiedAutoencoder(nn.Module):
    """(b) The encoder's weight reused, transposed, as the decoder's, outside the Linear's call."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(6, 4)

    def forward(self, x):
        return F.linear(torch.tanh(self.enc(x)), self.enc.weight.t())


class _Residual(nn.Module):
    """(b) A residual projection through the same weight: fc(x) + x W^T... as x @ W."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x):
        return self.fc(x) + x @ self.fc.weight


class _StandardisedConv(nn.Conv2d):
    """(d) Weight standardisation by ``_conv_forward``, ``forward`` kept: the unfold rule reads the raw weight."""

    def _conv_forward(self, x, w, b):
        w = (w - w.mean((1, 2, 3), keepdim=True)) / (w.std((1, 2, 3), keepdim=True) + 1e-5)
        return super()._conv_forward(x, w, b)


class _Looped(nn.Module):
    """(e) One block applied twice; a head kept (for pretraining), never called in this forward."""

    def __init__(self):
        super().__init__()
        self.block, self.head = nn.Linear(6, 6), nn.Linear(6, 2)

    def forward(self, x):
        return self.block(torch.tanh(self.block(x)))


def _tripled():
    """(c) A parameterless forward hook that changes a covered layer's output."""
    bottom = nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 6))
    bottom[2].register_forward_hook(lambda m, i, out: out * 3)
    return bottom


REVIEWED = {
    "(a) a Linear on reshaped rows": (_Tokenwise, (9, 6), 6),
    "(b) a tied autoencoder": (_TiedAutoencoder, (9, 6), 6),
    "(b) a residual projection through the layer's weight": (_Residual, (9, 6), 6),
    "(c) a forward hook tripling a covered layer's output": (_tripled, (9, 6), 6),
    "(d) a Conv2d subclass overriding _conv_forward": (lambda: nn.Sequential(_StandardisedConv(2, 3, 3), nn.Flatten()),
                                                       (9, 2, 4, 4), 12),
    "(e) a layer looped, another never called": (_Looped, (9, 6), 6),
}


@pytest.mark.parametrize(("build", "shape", "out_dim"), REVIEWED.values(), ids=REVIEWED.keys())
def test_the_review_s_bottoms_get_the_naive_loop_s_update(build, shape, out_dim):
    """Each bottom on which the tape read wrong norms or sums (one sample's clipped contribution up to 3.4 C_g in (a),
    squared norms 43x too small in (d), uninitialised memory in (e)) now gets the naive loop's update (torch.func)."""
    assert_naive(build, shape, out_dim)


def test_the_tape_applies_only_to_modules_of_known_forward_by_exact_type():
    """Covered layers, row-wise modules and known containers, by exact type: a subclass of any (its forward may
    differ), a module coupling the rows (a softmax over the batch, BatchNorm on its batch's statistics) or a Flatten
    folding the batch into the rows is not."""
    class _ReLU(nn.ReLU):
        pass

    assert per_sample.ghost_applies(nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Flatten()))
    spec = PartySpec(modality="tabular", shape=(6,), cardinalities=(3, 4))
    tabular = build_encoder(spec, ModelConfig(hidden=8, out_dim=4, cat_embedding=2), generator=torch.Generator()).eval()
    assert not per_sample.ghost_applies(tabular)  # a trainable embedding: no rule
    tabular.input.embeddings.requires_grad_(False)
    assert per_sample.ghost_applies(tabular)  # a frozen one: a lookup per row
    assert per_sample.ghost_applies(nn.Sequential(nn.Linear(4, 4), nn.Unflatten(1, (2, 2))))
    named = nn.Unflatten(1, (2, 2))
    named.dim = "features"  # a named dimension: not known to be a sample's own
    for odd in (_ReLU(), nn.Softmax(dim=0), nn.BatchNorm1d(4, affine=False), nn.Flatten(0), _Plain(4, 4),
                nn.Unflatten(0, (2, 2)), named):
        assert not per_sample.ghost_applies(nn.Sequential(nn.Linear(4, 4), odd)), odd


@pytest.mark.parametrize("where", ["on a layer", "global"])
def test_a_hook_added_after_the_wrapper_built_its_tape_still_gives_the_naive_loop_s_update(where):
    """A hook registered once the wrapper holds a tape (at ``train()``): the tape records what the hooked forward
    computed, so the update is still the naive loop's, which sees the hook."""
    handles = []

    def hooked(bottom):
        hook = lambda m, i, out: out * 3 if m is bottom[2] else out  # noqa: E731
        register = bottom[2].register_forward_hook if where == "on a layer" else \
            nn.modules.module.register_module_forward_hook
        handles.append(register(hook))

    try:
        assert_naive(lambda: nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 6)), (9, 6), 6, hooked=hooked)
    finally:
        for h in handles:
            h.remove()


@pytest.mark.parametrize(("build", "shape", "why"), [(_Tokenwise, (5, 6), "on (15, 2), not on the batch's 5 rows"),
                                                     (_Looped, (5, 6), "'block' was called 2 time(s)")],
                         ids=["reshaped rows", "a layer looped"])
def test_a_bottom_the_rules_would_misread_falls_back_to_torch_func_not_wrong_norms(build, shape, why, monkeypatch):
    """Should the structural check ever admit such a bottom, the tape's run-time check leaves the update to torch.func
    (the naive loop's; the run failed with a ProtocolError before), saying why, never the wrong norms."""
    monkeypatch.setattr(per_sample, "ghost_applies", lambda module: True)
    monkeypatch.setattr(embedding_dp, "ghost_applies", lambda module: True)
    tapes = []
    norms = per_sample.GhostTape.norms
    monkeypatch.setattr(per_sample.GhostTape, "norms", lambda self, *a, **k: tapes.append(self) or norms(self, *a, **k))
    assert_naive(build, shape, 6)
    assert len(tapes) == 1 and why in tapes[0].why


def _pooled(spec: PartySpec, config: ModelConfig, *, generator: torch.Generator) -> nn.Module:
    from vflpriv.methods.towers import PooledEncoder, build_local_encoder

    cross, local = (build_local_encoder(spec, config, generator=generator) for _ in range(2))
    return PooledEncoder(cross, local, "concat")


def _local(spec: PartySpec, config: ModelConfig, *, generator: torch.Generator) -> nn.Module:
    from vflpriv.methods.towers import build_local_encoder

    return build_local_encoder(spec, config, generator=generator)


BUILT_IN = {"digits MLP": (PartySpec(modality="tabular", shape=(12,)), build_encoder, 5),
            "image CNN": (PartySpec(modality="image", shape=(1, 16, 16)), build_encoder, 5),
            "SSL local encoder": (PartySpec(modality="tabular", shape=(12,)), _local, 5),
            "SSL pooled encoder (concat)": (PartySpec(modality="image", shape=(1, 16, 16)), _pooled, 10)}


@pytest.mark.parametrize(("spec", "build", "out_dim"), BUILT_IN.values(), ids=BUILT_IN.keys())
def test_the_built_in_bottoms_take_the_tape_and_get_the_naive_loop_s_update(spec, build, out_dim, monkeypatch):
    """vflpriv's own encoders keep the one-backward book-keeping path (every update from the tape's norms), and its
    update is the naive loop's to float rounding."""
    taped = []
    norms = per_sample.GhostTape.norms
    monkeypatch.setattr(per_sample.GhostTape, "norms",
                        lambda self, *a, **k: taped.append(norms(self, *a, **k)) or taped[-1])
    torch.manual_seed(0)
    bottom = build(spec, ModelConfig(hidden=8, out_dim=5), generator=torch.Generator().manual_seed(0))
    reference = copy.deepcopy(bottom).eval()  # the wrapper freezes the BatchNorm layers on their running statistics
    x, received = torch.randn(6, *spec.shape), torch.randn(6, out_dim) * 3
    _, state = step(bottom, x, received, sigma=0.4, clip=0.05)
    assert len(taped) == 1 and taped[0] is not None
    expected = naive(reference, x, received, sigma=0.4, clip=0.05, state=state)
    for p, e in zip(bottom.parameters(), expected, strict=True):
        assert torch.allclose(p.grad, e, rtol=1e-4, atol=1e-6)


def test_an_instance_s_own_forward_keeps_its_layer_off_the_tape():
    """``lin.forward = ...`` keeps the type nn.Linear but not its forward (the tape read the plain call: an update
    off the naive loop's by 5.9e-3); such a module is not known, and the bottom goes to torch.func."""
    import types

    lin = nn.Linear(4, 3)
    lin.forward = types.MethodType(lambda self, x: F.linear(x, 10 * self.weight, self.bias), lin)
    assert not per_sample.ghost_applies(nn.Sequential(lin, nn.ReLU()))
    conv = nn.Conv2d(1, 2, 3)
    conv._conv_forward = lambda x, w, b: F.conv2d(x, 4 * w, b)
    assert not per_sample.ghost_applies(nn.Sequential(conv, nn.Flatten()))
    assert per_sample.ghost_applies(nn.Sequential(nn.Linear(4, 3), nn.ReLU()))


def test_a_plugin_bottom_with_dropout_gets_a_clipped_update_from_torch_func():
    """A bottom of the plugin's own class goes to torch.func, whose vmap refused Dropout's random draws by default (the
    run crashed): each sample draws its own mask, and its clipped contribution stays within C."""
    class Plugin(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(5, 8), nn.Dropout(0.3), nn.Linear(8, 3))

        def forward(self, x):
            return self.net(x)

    torch.manual_seed(0)
    bottom, x, received = Plugin(), torch.randn(6, 5), torch.randn(6, 3)
    grads = per_sample.func_grads(bottom.train(), 1.0, x, received)
    assert all(torch.isfinite(g).all() for g in grads.values())

    class Branchy(Plugin):
        def forward(self, x):
            if x.sum() > 1e9:  # data-dependent control flow: torch.func cannot trace it
                return x
            return self.net(x)

    with pytest.raises(ProtocolError, match="Branchy cannot be computed by torch.func"):
        per_sample.func_grads(Branchy(), 1.0, x, received)
