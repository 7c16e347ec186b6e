"""embedding-dp's DP-SGD updates as steps of a training: the bottom keeps its parameter objects and trains on, a frozen
bottom is charged no step, the noise is the generator's next draws per parameter (never reused), and the update is bit
for bit the clipped sums formed in tensors of their own (revision 2's values)."""

from __future__ import annotations

import torch
from torch import nn

from vflpriv.defenses.embedding_dp import EmbeddingDP
from vflpriv.defenses.gaussian_message import clip_rows

from dp_sgd_helpers import Fake, step  # noqa: E402  (tests/defenses is on the path)


def test_a_module_reached_twice_keeps_training_after_an_update():
    """After a DP-SGD update through torch.func the module still holds the optimizer's parameters: the next update's
    gradient reaches them (accumulated onto the first) and a step moves the bottom."""
    torch.manual_seed(0)
    layer = nn.Linear(6, 6)
    bottom = nn.Sequential(layer, nn.Tanh(), layer)
    own = list(bottom.parameters())
    optimizer = torch.optim.SGD(own, lr=1.0)
    x = torch.randn(5, 6)
    fake, _ = step(bottom, x, torch.randn(5, 6), sigma=0.5, clip=1.0)
    first = [p.grad.clone() for p in own]
    step(bottom, x, torch.randn(5, 6), sigma=0.5, clip=1.0, fake=fake)
    assert all(not torch.equal(p.grad, g) for p, g in zip(own, first))
    before = bottom(x).detach()
    optimizer.step()
    assert not torch.equal(bottom(x).detach(), before)


def test_a_frozen_bottom_gets_no_update_and_no_step_is_charged_and_the_notes_say_so():
    """A bottom with nothing that trains: nothing of the features is released by an update, none is charged, and the
    run's notes say that DP-SGD had nothing to privatise."""
    bottom = nn.Sequential(nn.Linear(5, 4)).requires_grad_(False)
    fake, _ = step(bottom, torch.randn(8, 5), torch.randn(8, 4), sigma=1.0, clip=1.0)
    assert bottom[0].weight.grad is None and int(fake.stepped.counts().sum()) == 0
    fake.is_identity, fake.n_test, fake.test_rows = False, 0, 0
    assert "nothing to privatise in 1 update(s)" in EmbeddingDP.notes(fake)


def test_two_steps_on_zero_gradients_are_the_generator_s_next_draws_each():
    """Two updates on zero received gradients: each is sigma C_g / n times the generator's next draws (per parameter),
    the second the draws after the first's, so they differ (noise drawn afresh each step, never reused)."""
    torch.manual_seed(0)
    bottom = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16))
    fake = Fake(sigma=0.8, clip=0.5, n=4)
    updates = []
    for _ in range(2):
        for p in bottom.parameters():
            p.grad = None
        _, state = step(bottom, torch.randn(4, 8), torch.zeros(4, 16), sigma=0.8, clip=0.5, fake=fake)
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
    _, state = step(bottom, torch.randn(6, 5), torch.zeros(6, 3), sigma=1.0, clip=1.0)
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
    squares, clipped_sums = ghost_grads(bottom, lambda h: (clip_rows(h, clip=1.0) * received).sum(1), x)
    alone = {p: torch.empty(p.shape) for p in bottom.parameters()}
    clipped_sums(_scale(squares, 0.05), alone)
    step(bottom, x, received, sigma=0.0, clip=0.05)
    for p in bottom.parameters():
        assert torch.equal(p.grad, alone[p] / 23)
