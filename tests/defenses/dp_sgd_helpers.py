"""embedding-dp's DP-SGD update against its reference: one update of a bottom through its wrapper's taped forward,
and the naive per-sample autograd loop it must equal (each sample's gradient of its own clipped row times what it
received, clipped jointly to C_g, summed, plus sigma C_g times the generator's next draws per parameter, over n)."""

from __future__ import annotations

import copy

import torch
from torch import nn

from vflpriv.defenses.embedding_dp import Counts, EmbeddingDP, PrivateRows
from vflpriv.defenses.gaussian_message import clip_rows


class Fake:
    """The defense's state ``passive_backward`` reads, without a federation."""

    _foreign = EmbeddingDP._foreign
    misread = EmbeddingDP.misread

    def __init__(self, *, sigma: float, clip: float, n: int):
        self.strength, self.generator, self.stepped = sigma, torch.Generator().manual_seed(7), Counts(n)
        self.idle_updates, self.foreign, self.uncovered = 0, "", ""
        self.rows_checked, self.wrapped = False, []
        self.options = type("O", (), {"bottom_clip": clip})()


def step(bottom: nn.Module, x: torch.Tensor, received: torch.Tensor, *, sigma: float, clip: float, fake=None,
         hooked=None):
    """One DP-SGD update of ``bottom`` through its wrapper's taped forward (``hooked(bottom)`` called between the
    wrapping and the forward); the defense state and the noise stream's state before it."""
    fake = fake or Fake(sigma=sigma, clip=clip, n=x.shape[0])
    wrapped = PrivateRows(bottom, clip=1.0, sigma=0.3, frozen=True, generator=torch.Generator().manual_seed(3)).train()
    if hooked is not None:
        hooked(bottom)
    sent = wrapped(x)
    state = fake.generator.get_state()
    EmbeddingDP.passive_backward(fake, 1, wrapped, x, sent, received, torch.arange(x.shape[0]))
    return fake, state


def naive(bottom: nn.Module, x: torch.Tensor, received: torch.Tensor, *, sigma: float, clip: float,
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


def assert_naive(build, shape: tuple, out_dim: int, *, hooked=None) -> None:
    """One update of ``build()`` on a batch of ``shape`` (after ``hooked(bottom)``, where given, between the wrapping
    and the forward) equals :func:`naive`'s, in float64."""
    torch.set_default_dtype(torch.float64)
    try:
        torch.manual_seed(0)
        bottom = build()
        own = list(bottom.parameters())
        reference = copy.deepcopy(bottom)
        x, received = torch.randn(*shape) * 3, torch.randn(shape[0], out_dim) * 3
        _, state = step(bottom, x, received, sigma=0.4, clip=0.05, hooked=hooked)
        if hooked is not None:
            hooked(reference)
        expected = naive(reference, x, received, sigma=0.4, clip=0.05, state=state)
    finally:
        torch.set_default_dtype(torch.float32)
    assert all(a is b for a, b in zip(own, bottom.parameters(), strict=True))
    assert all(type(p) is nn.Parameter for m in bottom.modules()
               for _, p in m.named_parameters(recurse=False, remove_duplicate=False))
    for p, e in zip(bottom.parameters(), expected, strict=True):
        assert torch.allclose(p.grad, e, rtol=1e-9, atol=1e-12)
