"""fi-inversion and grn: the optimisation inverts a linear invertible bottom through the surrogate fitted on the known
pairs; GRN infers what the model's outputs and the adversary's own features determine, and no more."""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from feature_helpers import linear_view
from vflpriv.attacks.features.grn import GenerativeRegression, GRNOptions
from vflpriv.attacks.features.inversion import FeatureInversion, InversionOptions
from vflpriv.common import feature_metrics as fm


def test_a_linear_invertible_bottom_is_inverted_from_the_decoder_s_guess_and_from_the_mean():
    view, truth = linear_view(n_aux=300, n_test=100)
    decoder_start = FeatureInversion(InversionOptions(decoder_epochs=100, fit_lr=3e-3, surrogate_epochs=60))
    assert fm.mse(decoder_start.infer(view)["test"].features, truth["test"]) < 1e-3
    mean_start = FeatureInversion(InversionOptions(init="mean", fit_lr=3e-3, surrogate_epochs=60, steps=300, lr=0.03))
    assert fm.mse(mean_start.infer(view)["test"].features, truth["test"]) < 1e-3  # the optimisation alone inverts


class _Top(nn.Module):
    def __init__(self, generator):
        super().__init__()
        self.linear = nn.Linear(9, 10)
        with torch.no_grad():
            self.linear.weight.copy_(torch.randn(10, 9, generator=generator))

    def forward(self, reps):
        return self.linear(torch.cat(reps, 1))


def _grn_view(determined: bool):
    """The active party's view: own features x_a (3), the victim's x_b = [x_a, 1 - x_a] (or independent of x_a),
    rows x_b W, a linear top over [x_a, rows] whose logits it observes."""
    view, _ = linear_view(n_aux=300, n_test=100)
    g = torch.Generator().manual_seed(1)
    own = {k: torch.rand(v.shape[0], 3, generator=g) for k, v in view.received.items()}
    victim = {k: torch.cat([v, 1 - v], 1) if determined else torch.rand(v.shape[0], 6, generator=g)
              for k, v in own.items()}
    w = torch.randn(6, 6, generator=g)
    grn_view = dataclasses.replace(view, own=own, received={k: x @ w for k, x in victim.items()},
                                   aux_victim=victim["aux"], models={"bottom": nn.Identity(), "top": _Top(g)})
    return grn_view, victim["test"], victim["aux"].mean(0).expand_as(victim["test"])


def _grn(view):
    options = GRNOptions(observe="logits", variance_weight=0.0, epochs=20, lr=1e-3, surrogate_epochs=60,
                         surrogate_lr=3e-3)
    return GenerativeRegression(options).infer(view)["test"].features


def test_grn_recovers_what_the_outputs_and_its_own_features_determine():
    view, truth, mean = _grn_view(determined=True)
    assert fm.mse(_grn(view), truth) < 0.2 * fm.mse(mean, truth)


def test_grn_does_no_better_than_the_mean_where_its_own_features_say_nothing():
    """Its generator sees the adversary's features and noise, never a target's output: with independent features it
    can only learn the victim's distribution (Luo et al.'s GRNA learns the correlation)."""
    view, truth, mean = _grn_view(determined=False)
    assert fm.mse(_grn(view), truth) > 0.9 * fm.mse(mean, truth)


def test_each_target_set_is_inverted_as_if_alone_though_the_sets_share_each_step():
    """The sets share one surrogate forward per step; each keeps its own loss, TV, Adam state and clamp, so its
    reconstructions are bit for bit those of inverting it alone (a joint mean or a shared TV would couple them)."""
    g = torch.Generator().manual_seed(3)
    surrogate = nn.Sequential(nn.Flatten(), nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 5)).requires_grad_(False)
    starts = [torch.rand(7, 1, 4, 2, generator=g), torch.rand(30, 1, 4, 2, generator=g)]
    rows = [torch.randn(7, 5, generator=g), torch.randn(30, 5, generator=g)]
    attack = FeatureInversion(InversionOptions(steps=20, lr=0.05, tv=0.3))
    together = attack._invert(surrogate, starts, rows, image=True)
    for i in range(2):
        (alone,) = attack._invert(surrogate, [starts[i]], [rows[i]], image=True)
        assert not torch.equal(alone, starts[i].clamp(0, 1))  # it moved
        assert torch.equal(together[i], alone)
