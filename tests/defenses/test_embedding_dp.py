"""embedding-dp: each sent row clipped to C with N(0, sigma^2 C^2) noise, DP-SGD on the victim's bottom (per-sample
clipping to C_g, noise sigma C_g), rows computed independently, and a feature epsilon that equals an independent
computation where the argument covers the run and is absent (with the reason) where it does not."""

from __future__ import annotations

import copy
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from vflpriv.config.schema import RunConfig
from vflpriv.defenses.embedding_dp import PrivateRows
from vflpriv.runner.execution import run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "methods"))
from pretrain_helpers import TINY_MODEL, build_federation, tiny_options  # noqa: E402


def _config(method: str = "splitnn", *, sigma: float = 2.0, epochs: int = 2, finetune=None, **options) -> RunConfig:
    return RunConfig.model_validate({
        "partition": {"labeled": 100, "aux": 40}, "model": TINY_MODEL,
        "finetune": {"epochs": epochs, "batch_size": 32, **(finetune or {})},
        "method": {"name": method, "options": tiny_options(method)},
        "defenses": [{"name": "embedding-dp", "strength": sigma, "sweep": True, "options": options}],
        "attack": {"name": "fi-decoder", "options": {"epochs": 3}}})


def _defense(config: RunConfig):
    p, fed = build_federation(config)
    return p.defenses[0], fed, p


class _Rows(nn.Module):
    out_dim = 10

    def forward(self, x):
        return x


def test_each_sent_row_is_clipped_to_c_and_gets_noise_of_std_sigma_c():
    g = torch.Generator().manual_seed(0)
    wrapped = PrivateRows(_Rows(), clip=1.5, sigma=0.7, frozen=True, generator=g)
    x = torch.randn(6, 2, 5, generator=torch.Generator().manual_seed(1))  # rows of 2 x 5 entries
    x[0] *= 0.01  # a row well inside the ball stays as it is
    state = g.get_state()
    out = wrapped(x)
    g.set_state(state)
    noise = torch.randn(x.shape, generator=g)
    signal = out - 0.7 * 1.5 * noise
    norms = x.flatten(1).norm(dim=1, keepdim=True)
    expected = x.flatten(1) * torch.clamp(1.5 / norms, max=1.0)
    assert torch.allclose(signal.flatten(1), expected, atol=1e-6)
    assert torch.allclose(signal[0], x[0], atol=1e-7)
    assert bool((signal.flatten(1).norm(dim=1) <= 1.5 + 1e-5).all())
    many = PrivateRows(_Rows(), clip=0.5, sigma=3.0, frozen=True, generator=torch.Generator().manual_seed(2))
    zero = many(torch.zeros(4000, 25))
    assert float(zero.std()) == pytest.approx(3.0 * 0.5, rel=0.02)


@pytest.mark.parametrize("activation", [nn.ReLU, nn.PReLU], ids=["ghost clipping", "torch.func (a PReLU weight)"])
def test_dp_sgd_on_the_bottom_clips_each_sample_s_gradient_to_c_g_and_adds_noise_sigma_c_g(activation):
    dp, fed, _ = _defense(_config(sigma=0.8, bottom_clip=0.3))
    torch.manual_seed(0)
    bottom = nn.Sequential(nn.Linear(4, 3), activation(), nn.Linear(3, 5))
    bottom.out_dim = 5
    wrapped = dp.passive_bottom(1, bottom)
    x, grad = torch.randn(7, 4), torch.randn(7, 5) * 3
    grad[0] *= 1e-3  # one sample's gradient inside the ball: it is not scaled up
    sent = wrapped(x)
    params = list(wrapped.parameters())
    per_sample = []
    for i in range(7):  # one sample at a time: its own row's objective
        row = clip(bottom(x[i:i + 1]), 1.0) + (sent[i:i + 1] - clip(bottom(x[i:i + 1]), 1.0)).detach()
        per_sample.append(torch.autograd.grad((row * grad[i:i + 1]).sum(), params))
    state = dp.generator.get_state()
    dp.passive_backward(1, wrapped, x, sent, grad, torch.arange(7))
    dp.generator.set_state(state)  # the noise: one draw per parameter, in their order (sizes not multiples of 16)
    noises = [torch.randn(p.shape, generator=dp.generator) for p in params]
    for k, p in enumerate(params):
        norms = [math.sqrt(sum(float(g.pow(2).sum()) for g in sample)) for sample in per_sample]
        assert min(norms) < 0.3 < max(norms)
        clipped = sum(sample[k] * min(1.0, 0.3 / n) for sample, n in zip(per_sample, norms))
        assert torch.allclose(p.grad, (clipped + 0.8 * 0.3 * noises[k].view(p.shape)) / 7, atol=1e-6)
    assert int(dp.steps[:7].sum()) == 7


def test_ghost_clipping_equals_torch_func_s_per_sample_gradients_clipped_and_summed():
    """A bottom of Linear and frozen BatchNorm1d layers gets DP-SGD's per-sample norms and clipped sums from one
    backward; they equal torch.func's per-sample gradients, clipped and summed (a frozen parameter left out of both)."""
    from vflpriv.defenses.per_sample import ghost_applies

    torch.manual_seed(0)
    bottom = nn.Sequential(nn.Linear(6, 9), nn.BatchNorm1d(9), nn.ReLU(inplace=True), nn.Linear(9, 5),
                           nn.BatchNorm1d(5), nn.ReLU(inplace=True))
    bottom(torch.randn(50, 6) * 2 + 1)  # running statistics away from 0 and 1
    assert not ghost_applies(bottom)  # BatchNorm on its batch's statistics couples the rows
    bottom.eval()
    bottom[0].bias.requires_grad_(False)
    assert ghost_applies(bottom) and not ghost_applies(nn.Sequential(nn.Linear(6, 9), nn.PReLU()))
    _assert_ghost_equals_torch_func(bottom, torch.randn(11, 6), torch.randn(11, 5) * 4, trained=7, atol=1e-6)


def _assert_ghost_equals_torch_func(bottom: nn.Module, x: torch.Tensor, received: torch.Tensor, *, trained: int,
                                    atol: float) -> None:
    """Ghost clipping's norms and clipped sums of ``bottom`` equal torch.func's per-sample gradients, clipped
    (some samples scaled, some not) and summed, over its ``trained`` trainable parameters."""
    from vflpriv.defenses.embedding_dp import _scale
    from vflpriv.defenses.per_sample import func_grads
    from vflpriv.defenses.gaussian_message import clip_rows
    from vflpriv.defenses.per_sample import ghost_grads

    squares, clipped_sums = ghost_grads(bottom, lambda h: (clip_rows(h, clip=0.7) * received).sum(1), x)
    grads = func_grads(bottom, 0.7, x, received)
    params = [(k, p) for k, p in bottom.named_parameters() if p.requires_grad]
    assert len(params) == trained and set(grads) == {k for k, _ in params}
    assert torch.allclose(squares, sum(grads[k].flatten(1).pow(2).sum(1) for k, _ in params), rtol=1e-5)
    scale = _scale(squares, 0.4)
    assert 0 < float(scale.min()) < float(scale.max()) <= 1
    sums = {p: torch.full(p.shape, float("nan")) for _, p in params}  # every entry must be written
    clipped_sums(scale, sums)
    for k, p in params:
        assert torch.allclose(sums[p], torch.einsum("n,n...->...", scale, grads[k]), atol=atol), k


def test_the_taped_update_is_torch_func_s_per_sample_gradients_clipped_summed_and_noised():
    """Book-keeping on the path digits' finetuning takes (the wrapper's own forward taped, one backward that forms no
    weight gradient, the clipped sums from the recorded rows, the noise drawn per parameter into one buffer): each
    parameter's update
    equals (sum_i min(1, C_g / |g_i|) g_i + sigma C_g noise) / n with g_i from torch.func's per-sample gradients of
    sample i's own clipped row times what it received, to float rounding (a digits-shaped bottom, BatchNorm frozen)."""
    from vflpriv.defenses.per_sample import func_grads

    dp, _, _ = _defense(_config(sigma=0.6, bottom_clip=0.05))
    torch.manual_seed(0)
    bottom = nn.Sequential(nn.Linear(5, 8), nn.BatchNorm1d(8), nn.ReLU(inplace=True), nn.Linear(8, 6),
                           nn.BatchNorm1d(6), nn.ReLU(inplace=True))
    bottom(torch.randn(60, 5) * 2 + 1)  # running statistics away from 0 and 1, then frozen by the wrapper
    bottom.out_dim = 6
    wrapped = dp.passive_bottom(1, bottom)
    x, received = torch.randn(12, 5), torch.randn(12, 6) * 3
    sent = wrapped(x)
    state = dp.generator.get_state()
    dp.passive_backward(1, wrapped, x, sent, received, torch.arange(12))
    dp.generator.set_state(state)
    names = [k for k, p in bottom.named_parameters() if p.requires_grad]
    params = [p for p in bottom.parameters() if p.requires_grad]
    assert len(params) == 8 and all(p.grad is not None for p in params)
    grads = func_grads(bottom, 1.0, x, received)  # the wrapper's row clip C is 1 (the config's default)
    norms = sum(grads[k].flatten(1).square().sum(1) for k in names).sqrt()
    scale = (0.05 / norms).clamp(max=1.0)
    assert 0 < float(scale.min()) < 1 and float(scale.max()) <= 1  # most samples clipped
    noise = [torch.randn(p.shape, generator=dp.generator) for p in params]  # sizes 40 and 8: not multiples of 16
    for k, p, n in zip(names, params, noise):
        expected = (torch.einsum("n,n...->...", scale, grads[k]) + 0.6 * 0.05 * n.view(p.shape)) / 12
        assert torch.allclose(p.grad, expected, atol=1e-6, rtol=1e-5), k


def test_a_frozen_batchnorm_s_statistics_changed_in_place_are_read_again():
    """A frozen BatchNorm's statistics changed after one update (in place, replaced, its eps, or by a train-mode forward
    of its own, which bumps no version counter) are read again at the next: its sums equal those of a fresh tape bit
    for bit (a cache keyed by address, version counter and eps would miss the replaced one)."""
    torch.manual_seed(0)
    bottom = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(inplace=True), nn.Linear(6, 5))
    bottom(torch.randn(40, 4))
    bottom.out_dim = 5
    x, grad = torch.randn(9, 4), torch.randn(9, 5) * 2

    def update(wrapped, dp) -> list[torch.Tensor]:
        for p in wrapped.parameters():
            p.grad = None
        dp.generator.manual_seed(3)
        dp.passive_backward(1, wrapped, x, wrapped(x), grad, torch.arange(9))
        return [p.grad.clone() for p in wrapped.parameters() if p.requires_grad]

    dp, _, _ = _defense(_config(sigma=0.5, bottom_clip=0.2))
    wrapped = dp.passive_bottom(1, bottom)
    before = update(wrapped, dp)
    def replaced(bn):  # another tensor at the old one's address and version counter (detach shares both), new values
        old, before = bn.running_var, bn.running_var.clone()
        new = old.detach()
        new.numpy()[:] += 1  # a numpy write bumps no version counter
        assert new is not old and new.data_ptr() == old.data_ptr() and not torch.equal(new, before)
        bn.running_var = new

    def trained(bn):  # BatchNorm's native kernel updates the statistics without bumping their version
        bn.train()
        bn(torch.randn(8, 6) * 5)
        bn.eval()

    for change in (lambda bn: bn.running_var.mul_(3.0), replaced, lambda bn: setattr(bn, "eps", 0.5), trained):
        change(bottom[1])
        again = update(wrapped, dp)
        fresh_dp, _, _ = _defense(_config(sigma=0.5, bottom_clip=0.2))
        fresh = update(fresh_dp.passive_bottom(1, copy.deepcopy(bottom)), fresh_dp)
        assert any(not torch.equal(a, b) for a, b in zip(before, again))
        for a, b in zip(again, fresh, strict=True):
            assert torch.equal(a, b)


def test_dp_sgd_reads_the_tape_of_the_forward_that_computed_the_rows_it_is_given_and_no_other():
    """DP-SGD's norms come from what the forward that computed ``sent`` recorded (no second forward); after a later
    forward (another batch) the earlier rows get a forward of their own, not the later batch's tape, and the sums equal
    those of a fresh forward bit for bit either way."""
    torch.manual_seed(0)
    bottom = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(inplace=True), nn.Linear(6, 5))
    bottom(torch.randn(40, 4))  # running statistics to freeze
    bottom.out_dim = 5
    x, other, grad = torch.randn(9, 4), torch.randn(9, 4) * 3, torch.randn(9, 5) * 2

    def grads(order: str, *, frozen_bias: str = "") -> list[torch.Tensor]:
        dp, _, _ = _defense(_config(sigma=0.5, bottom_clip=0.2))
        inner = copy.deepcopy(bottom)
        if frozen_bias == "before":
            inner[0].bias.requires_grad_(False)
        wrapped = dp.passive_bottom(1, inner)
        if frozen_bias == "after":  # after the tape was made: it no longer covers what trains
            inner[0].bias.requires_grad_(False)
        sent = wrapped(x)
        if order == "stale":
            wrapped(other)  # a later forward: its tape is not sent's
        elif order == "elsewhere":
            sent = wrapped.bottom(x)  # rows computed without the wrapper's forward: no tape of theirs
            sent = clip(sent, 1.0) + (wrapped(x) - clip(sent, 1.0)).detach()
        dp.generator.manual_seed(7)  # the same DP-SGD noise in each (the extra forwards drew row noise)
        dp.passive_backward(1, wrapped, x, sent, grad, torch.arange(9))
        return [p.grad for p in wrapped.parameters() if p.requires_grad]

    fresh = grads("tape")
    for order in ("stale", "elsewhere"):
        for a, b in zip(fresh, grads(order)):
            assert torch.equal(a, b), order
    for a, b in zip(grads("tape", frozen_bias="before"), grads("tape", frozen_bias="after"), strict=True):
        assert torch.equal(a, b), "a parameter frozen after wrapping"


def test_a_snapshot_between_the_forward_and_the_update_copies_the_bottom_without_its_tape():
    """An adversary deep-copies the passive bottom after the forward that sent the rows and before DP-SGD's update
    (``passive_step``): the copy works, computes the same clipped rows, and the update still reads the tape."""
    dp, _, _ = _defense(_config(sigma=0.5))
    bottom = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(inplace=True), nn.Linear(6, 5))
    bottom.out_dim = 5
    wrapped = dp.passive_bottom(1, bottom)
    x, grad = torch.randn(9, 4), torch.randn(9, 5)
    sent = wrapped(x)
    snapshot = copy.deepcopy(wrapped)
    assert snapshot.taped is None and wrapped.taped is not None
    assert torch.equal(clip(snapshot.bottom(x), 1.0), clip(wrapped.bottom(x), 1.0))
    dp.passive_backward(1, wrapped, x, sent, grad, torch.arange(9))
    assert wrapped.taped is None and all(p.grad is not None for p in wrapped.parameters())


def test_ghost_clipping_of_a_cnn_equals_torch_func_s_per_sample_gradients_clipped_and_summed():
    """A bottom of Conv2d, frozen BatchNorm2d, pooling, Linear and frozen BatchNorm1d layers (channels-last, as the CNN
    bottom): norms and clipped sums by the unfold rules equal torch.func's per-sample gradients, clipped and summed.
    The first convolution (30 positions, 4 x 18 weights) takes the materialised rule, the second (9 positions, 40 x 36
    weights, with a bias) Li et al.'s Gram-matrix ghost norm."""
    from vflpriv.defenses.per_sample import ghost_applies

    torch.manual_seed(0)
    bottom = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(inplace=True),
                           nn.Conv2d(4, 40, 3, stride=2, padding=1), nn.BatchNorm2d(40), nn.ReLU(inplace=True),
                           nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(40, 5), nn.BatchNorm1d(5), nn.ReLU())
    bottom(torch.randn(30, 2, 6, 5) * 2 + 1)  # running statistics away from 0 and 1
    assert not ghost_applies(bottom)
    bottom = bottom.eval().to(memory_format=torch.channels_last)
    assert ghost_applies(bottom) and not ghost_applies(nn.Sequential(nn.Conv2d(4, 4, 3, groups=2)))
    x = torch.randn(7, 2, 6, 5).contiguous(memory_format=torch.channels_last)
    _assert_ghost_equals_torch_func(bottom, x, torch.randn(7, 5) * 4, trained=11, atol=1e-5)


def clip(h: torch.Tensor, c: float) -> torch.Tensor:
    return h * torch.clamp(c / h.norm(dim=1, keepdim=True), max=1.0)


def test_rows_are_computed_independently_of_the_rest_of_their_batch():
    """With the BatchNorm statistics frozen a sample's row depends on its own features only (what both bounds need);
    the bottom's BatchNorm, trained normally, would move every row with any sample of the batch."""
    dp, fed, _ = _defense(_config())
    from vflpriv.models.encoders import build_encoder

    bottom = build_encoder(fed.parties[1].spec, fed.model, generator=torch.Generator().manual_seed(0))
    wrapped = dp.passive_bottom(1, bottom).train()
    x = fed.parties[1].x_train[:16].clone()
    state = dp.generator.get_state()
    first = wrapped(x)
    x[5:] = torch.rand_like(x[5:])
    dp.generator.set_state(state)
    assert torch.equal(wrapped(x)[:5], first[:5])
    loose = PrivateRows(bottom, clip=1.0, sigma=1.0, frozen=False, generator=dp.generator).train()
    dp.generator.set_state(state)
    before = loose(fed.parties[1].x_train[:16])
    dp.generator.set_state(state)
    assert not torch.equal(loose(x)[:5], before[:5])


#: Opacus' default RDP orders.
ORDERS = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64))


def independent_epsilon(sigma: float, uses: int, delta: float) -> float:
    """``uses`` Gaussian mechanisms of L2 sensitivity 2C and noise std sigma C (replace-one), composed: RDP
    uses * alpha * (2C)^2 / (2 sigma^2 C^2) at each order, converted to (epsilon, delta) as Balle et al. 2020 (Opacus'
    conversion), minimised over the orders."""
    best = math.inf
    for a in ORDERS:
        rdp = uses * a * 4.0 / (2.0 * sigma**2)
        eps = rdp + math.log((a - 1) / a) - (math.log(delta) + math.log(a)) / (a - 1)
        best = min(best, eps)
    return best


def test_the_epsilon_of_a_small_covered_run_equals_an_independent_computation():
    (record,) = run(_config(sigma=4.0, epochs=3))
    assert record.status == "ok", record.error
    # every labeled aligned sample: one row sent and one DP-SGD step per epoch, 3 epochs, nothing else
    assert record.epsilon_features == pytest.approx(independent_epsilon(4.0, 6, 1e-5), rel=1e-9)
    assert record.epsilon_features_delta == 1e-5
    assert math.isnan(record.epsilon)  # no label-DP claim, and none mixed with this one
    assert "test row" in record.notes and "not the training's epsilon" in record.notes
    for note in record.notes.split("; "):  # a record's notes are "; "-joined, and the commands print one per line
        assert note.count("(") == note.count(")"), note


def test_the_counts_are_one_release_and_one_step_per_epoch_and_fedbcd_s_local_updates_are_charged():
    dp, fed, p = _defense(_config(epochs=2, finetune={"local_updates": 2}))
    p.method.finetune(fed, None)
    trained_on = fed.labeled_aligned().cpu()
    assert bool((dp.releases[trained_on] == 2).all()) and int(dp.releases.sum()) == 2 * trained_on.numel()
    assert bool((dp.steps[trained_on] == 4).all()) and int(dp.steps.sum()) == 4 * trained_on.numel()
    assert dp.uses() == 6
    assert dp.privacy_spent() == pytest.approx(independent_epsilon(2.0, 6, 1e-5), rel=1e-9)


@pytest.mark.parametrize(("method", "options", "finetune", "reason"), [
    ("local-simsiam", {}, None, "pretraining trains each party's encoder"),
    ("fedhssl", {}, None, "sends parameters trained on its features to the server"),
    ("splitnn", {"private_bottom": False}, None, "private_bottom=false"),
    ("splitnn", {}, {"bn_recalibrate": True}, "bn_recalibrate"),
])
def test_an_uncovered_configuration_records_no_epsilon_and_says_why(method, options, finetune, reason):
    (record,) = run(_config(method, finetune=finetune, **options))
    assert record.status == "ok", record.error
    assert math.isnan(record.epsilon_features) and math.isnan(record.epsilon)
    assert "embedding-dp: no epsilon recorded" in record.notes and reason in record.notes
    assert "test row" in record.notes  # what still holds: one release of a frozen bottom, per test sample


def test_private_bottom_false_noises_the_rows_but_trains_the_bottom_normally():
    dp, fed, p = _defense(_config(private_bottom=False))
    assert not dp.passive_backpropagates(1)
    trained = p.method.finetune(fed, None)
    assert int(dp.steps.sum()) == 0 and int(dp.releases.sum()) > 0
    bn = [m for m in trained.bottoms[1].modules() if isinstance(m, nn.BatchNorm1d)]
    assert bn and all(int(m.num_batches_tracked) > 0 for m in bn)  # its statistics trained


def test_an_independent_check_of_the_accountant_on_one_step():
    """One Gaussian mechanism of multiplier 1 at delta 1e-5: the known analytic-free RDP value, minimised by hand."""
    from vflpriv.defenses.embedding_dp import gaussian_epsilon

    assert gaussian_epsilon(1.0, 1, delta=1e-5) == pytest.approx(independent_epsilon(2.0, 1, 1e-5), rel=1e-9)
    values = [gaussian_epsilon(m, 10, delta=1e-5) for m in (0.5, 1.0, 2.0, 4.0)]
    assert values == sorted(values, reverse=True)  # more noise, less epsilon
    assert np.isfinite(values).all()


def test_strength_zero_neither_wraps_nor_counts_nor_claims():
    dp, fed, p = _defense(_config(sigma=0.0))
    bottom = nn.Identity()
    assert dp.passive_bottom(1, bottom) is bottom and not dp.passive_backpropagates(1)
    p.method.finetune(fed, None)
    assert int(dp.releases.sum()) == 0 and dp.privacy_spent() is None and dp.notes() == ""
