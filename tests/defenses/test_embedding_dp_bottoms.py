"""embedding-dp's DP-SGD on bottoms its ghost-clipping rules do not cover exactly (an extra parameter, a tied weight,
a module reached twice, a subclass, a frozen bottom) and its noise: each update equals a naive per-sample autograd loop,
clipped to C_g, summed, plus sigma C_g times the generator's next draws (one per parameter), over n."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from vflpriv.defenses.embedding_dp import Counts, EmbeddingDP, PrivateRows
from vflpriv.defenses.gaussian_message import clip_rows


class _Fake:
    """The defense's state ``passive_backward`` reads, without a federation."""

    def __init__(self, *, sigma: float, clip: float, n: int):
        self.strength, self.generator, self.stepped = sigma, torch.Generator().manual_seed(7), Counts(n)
        self.idle_updates = 0
        self.options = type("O", (), {"bottom_clip": clip})()


def _step(bottom: nn.Module, x: torch.Tensor, received: torch.Tensor, *, sigma: float, clip: float, fake=None):
    """One DP-SGD update of ``bottom`` through its wrapper's taped forward; the defense state and the noise stream's
    state before it."""
    fake = fake or _Fake(sigma=sigma, clip=clip, n=x.shape[0])
    wrapped = PrivateRows(bottom, clip=1.0, sigma=0.3, frozen=True, generator=torch.Generator().manual_seed(3)).train()
    sent = wrapped(x)
    state = fake.generator.get_state()
    EmbeddingDP.passive_backward(fake, 1, wrapped, x, sent, received, torch.arange(x.shape[0]))
    return fake, state


def _naive(bottom: nn.Module, x: torch.Tensor, received: torch.Tensor, *, sigma: float, clip: float,
           state: torch.Tensor) -> list[torch.Tensor]:
    """Each trainable parameter's update by a loop over the samples: sample i's gradient of its own clipped row times
    what it received, over every trainable parameter, clipped jointly to ``clip``, summed, plus sigma C_g N(0, 1) drawn
    per parameter in order, over n."""
    params = [p for p in bottom.parameters() if p.requires_grad]
    total = [torch.zeros_like(p) for p in params]
    for i in range(x.shape[0]):
        row = clip_rows(bottom(x[i:i + 1]), clip=1.0)
        grads = torch.autograd.grad((row * received[i:i + 1]).sum(), params, allow_unused=True)
        grads = [torch.zeros_like(p) if g is None else g for g, p in zip(grads, params)]
        scale = min(1.0, clip / max(float(sum(g.square().sum() for g in grads).sqrt()), 1e-12))
        total = [t + scale * g for t, g in zip(total, grads)]
    generator = torch.Generator().manual_seed(0)
    generator.set_state(state)
    return [(t + sigma * clip * torch.randn(p.shape, generator=generator, dtype=p.dtype)) / x.shape[0]
            for t, p in zip(total, params)]


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
    torch.set_default_dtype(torch.float64)
    try:
        torch.manual_seed(0)
        bottom = build()
        own = list(bottom.parameters())
        reference = copy.deepcopy(bottom)
        x, received = torch.randn(9, 6), torch.randn(9, 6) * 3
        _, state = _step(bottom, x, received, sigma=0.4, clip=0.05)
        expected = _naive(reference, x, received, sigma=0.4, clip=0.05, state=state)
    finally:
        torch.set_default_dtype(torch.float32)
    assert all(a is b for a, b in zip(own, bottom.parameters(), strict=True))
    assert all(type(p) is nn.Parameter for m in bottom.modules() for p in m._parameters.values() if p is not None)
    for p, e in zip(bottom.parameters(), expected, strict=True):
        assert torch.allclose(p.grad, e, rtol=1e-9, atol=1e-12)


def test_a_module_reached_twice_keeps_training_after_an_update():
    """After a DP-SGD update through torch.func the module still holds the optimizer's parameters: the next update's
    gradient reaches them (accumulated onto the first) and a step moves the bottom."""
    torch.manual_seed(0)
    bottom = _twice()
    own = list(bottom.parameters())
    optimizer = torch.optim.SGD(own, lr=1.0)
    x = torch.randn(5, 6)
    fake, _ = _step(bottom, x, torch.randn(5, 6), sigma=0.5, clip=1.0)
    first = [p.grad.clone() for p in own]
    _step(bottom, x, torch.randn(5, 6), sigma=0.5, clip=1.0, fake=fake)
    assert all(not torch.equal(p.grad, g) for p, g in zip(own, first))
    before = bottom(x).detach()
    optimizer.step()
    assert not torch.equal(bottom(x).detach(), before)


def test_a_frozen_bottom_gets_no_update_and_no_step_is_charged_and_the_notes_say_so():
    """A bottom with nothing that trains: nothing of the features is released by an update, none is charged, and the
    run's notes say that DP-SGD had nothing to privatise."""
    bottom = nn.Sequential(nn.Linear(5, 4)).requires_grad_(False)
    fake, _ = _step(bottom, torch.randn(8, 5), torch.randn(8, 4), sigma=1.0, clip=1.0)
    assert bottom[0].weight.grad is None and int(fake.stepped.counts().sum()) == 0
    fake.is_identity, fake.n_test, fake.test_rows = False, 0, 0
    assert "nothing to privatise in 1 update(s)" in EmbeddingDP.notes(fake)


def test_two_steps_on_zero_gradients_are_the_generator_s_next_draws_each():
    """Two updates on zero received gradients: each is sigma C_g / n times the generator's next draws (per parameter),
    the second the draws after the first's, so they differ (noise drawn afresh each step, never reused)."""
    torch.manual_seed(0)
    bottom = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16))
    fake = _Fake(sigma=0.8, clip=0.5, n=4)
    updates = []
    for _ in range(2):
        for p in bottom.parameters():
            p.grad = None
        _, state = _step(bottom, torch.randn(4, 8), torch.zeros(4, 16), sigma=0.8, clip=0.5, fake=fake)
        generator = torch.Generator()
        generator.set_state(state)
        updates.append([p.grad.clone() for p in bottom.parameters()])
        for p in bottom.parameters():
            assert torch.equal(p.grad, torch.randn(p.shape, generator=generator).mul_(0.8 * 0.5).div_(4))
    assert all(not torch.equal(a, b) for a, b in zip(*updates))


def test_noise_on_sizes_not_a_multiple_of_16_is_one_draw_per_parameter():
    """Parameters of 35, 7, 21 and 3 entries: the update is the per-parameter draws' values (revision 2's), which one
    flat draw of all 66 would not give."""
    bottom = nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 3))
    _, state = _step(bottom, torch.randn(6, 5), torch.zeros(6, 3), sigma=1.0, clip=1.0)
    generator = torch.Generator()
    generator.set_state(state)
    for p in bottom.parameters():
        assert torch.equal(p.grad, torch.randn(p.shape, generator=generator).div_(6))


def test_the_update_is_bit_for_bit_the_sums_formed_in_tensors_of_their_own():
    """Sizes not multiples of 16 put parameters at unaligned offsets of the one flat buffer: the update (sigma 0) is
    still, bit for bit, the clipped sums each formed in a tensor of its own, over n (revision 2's values)."""
    from vflpriv.defenses.embedding_dp import _scale
    from vflpriv.defenses.per_sample import ghost_grads

    torch.manual_seed(0)
    bottom = nn.Sequential(nn.Linear(19, 37), nn.BatchNorm1d(37), nn.ReLU(), nn.Linear(37, 11), nn.Tanh(),
                           nn.Linear(11, 13))
    bottom(torch.randn(50, 19) * 2 + 1)
    bottom.eval()
    x, received = torch.randn(23, 19), torch.randn(23, 13) * 3
    squares, clipped_sums = ghost_grads(bottom, lambda h: (clip_rows(h, clip=1.0) * received).sum(), x)
    alone = {p: torch.empty(p.shape) for p in bottom.parameters()}
    clipped_sums(_scale(squares, 0.05), alone)
    _step(bottom, x, received, sigma=0.0, clip=0.05)
    for p in bottom.parameters():
        assert torch.equal(p.grad, alone[p] / 23)
