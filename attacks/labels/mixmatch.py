"""Model completion with MixMatch (Fu et al. 2022, "Label Inference Attacks Against Vertical Federated
Learning", §4.2; MixMatch: Berthelot et al. 2019, Algorithm 1; REFERENCE.md §9).

The adversary fine-tunes a copy of its bottom model together with a head BN -> ReLU -> Linear, semi-
supervised on its auxiliary labeled samples X and its unlabeled local samples U (``view.local_x``):

1. one augmentation x^ of each labeled sample, K = 2 augmentations u^_1, u^_2 of each unlabeled one;
2. guessed label q = Sharpen(mean_k softmax(model(u^_k)), T), Sharpen(p)_c = p_c^(1/T) / sum_j p_j^(1/T);
3. MixUp of W = Shuffle(X^ ++ U^) into both: lam ~ Beta(alpha, alpha), lam' = max(lam, 1 - lam),
   mixed = lam' a + (1 - lam') b (inputs and targets);
4. loss L_X + lambda_u(t) L_U: cross-entropy on mixed labeled, squared error of the softmax on mixed
   unlabeled, lambda_u ramped linearly from 0 to its value over the whole training (Fu et al.'s code);
5. Adam (lr 2e-3) on the model, then the weights decay by ``weight_decay * lr`` per step (0.02: MixMatch's
   and Fu et al.'s code); an EMA copy (decay 0.999, BN statistics included) predicts. ``ema_warmup`` (off by
   default, on in the audit's short trainings) caps the decay at (1 + t) / (10 + t) at step t.

Defaults: T 0.8, alpha 0.75, lambda_u 50 (Fu et al.). Augmentation: mild crops for image halves (no
flip: a flipped half digit is another shape) with K = 2; tabular parties are not augmented and guess
from one view (K = 1), as in Fu et al.'s code. Why: SCARF resampling (``augment_rate`` > 0) is not
label-preserving on heavy-tailed tabular features; on breast-cancer it biased the guesses toward one
class until the model predicted it for 90% of the samples (accuracy 0.47-0.55 at AUC 0.96-0.98 in 2 of
3 seeds) while no augmentation gave 0.86-0.90. Self-training with lambda_u 50 can still collapse on
other data; an AUC far above the accuracy in a binary task is the sign.
Beta draws use the inverse CDF on a uniform from the view's generator, so a seed fixes every draw.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from pydantic import Field, model_validator
from scipy.special import betaincinv
from torch import nn

from vflpriv.attacks.base import AdversaryView, Attack, Inference
from vflpriv.attacks.labels.model_completion import completed_model, guesses
from vflpriv.config.options import Options
from vflpriv.models.ssl import augment_images, make_augmenter, momentum_copy, momentum_updater
from vflpriv.models.ssl.momentum import flat_ema
from vflpriv.models.training import apply_in_batches, make_optimizer, require_finite


#: The smallest sharpening T: (p_j / p_max)^(1/T) is already below 1e-4 for p_j <= 0.99 p_max there, and above it
#: log(p) / T stays finite even for float16 guesses (below about 1e-37 it overflowed to -inf: NaN rows).
MIN_TEMPERATURE = 1e-3


class MixMatchOptions(Options):
    epochs: int = Field(30, ge=1)
    iterations: int = Field(100, ge=1, description="optimiser steps per epoch")
    batch_size: int = Field(64, ge=2)
    lr: float = Field(2e-3, gt=0)
    temperature: float = Field(0.8, ge=MIN_TEMPERATURE, description="sharpening T")
    alpha: float = Field(0.75, gt=0, description="MixUp Beta(alpha, alpha)")
    lambda_u: float = Field(50.0, ge=0, description="unlabeled loss weight after the linear ramp-up")
    ema: float = Field(0.999, ge=0, le=1, description="EMA decay of the model used to predict")
    ema_warmup: bool = Field(False, description="decay min(ema, (1 + t) / (10 + t)) at step t (TensorFlow's "
                             "ExponentialMovingAverage num_updates), so a short training's EMA forgets the random init")
    views: int = Field(2, ge=1, description="augmented views K averaged for the label guess (1 without augmentation)")
    augment_rate: float = Field(0.0, ge=0, le=1, description="tabular: fraction of features resampled (0 = none)")
    weight_decay: float = Field(0.02, ge=0, description="per-step decay of the weights by weight_decay * lr")
    head_init: Literal["default", "ones"] = Field(
        "default", description="head's Linear weights: default (vflpriv's seeded init) or ones (Fu et al.'s code)")
    report_best_epoch_on_targets: bool = Field(False, description="also report the best epoch on test labels")

    @model_validator(mode="after")
    def _moves(self) -> MixMatchOptions:
        """Refuse settings under which the model that predicts never learns: an EMA of decay 1 stays the initial copy;
        a weight decay of weight_decay * lr >= 1 per step zeroes or flips every weight."""
        if self.ema == 1 and not self.ema_warmup:
            raise ValueError("ema=1 keeps the predicting EMA copy at its initial weights (decay 1 never moves it); "
                             "give ema below 1, or ema_warmup=true")
        if self.weight_decay * self.lr >= 1:
            raise ValueError(f"weight_decay * lr = {self.weight_decay * self.lr:g}: the weights decay by that share "
                             f"per step, so at 1 or more they are zeroed or flipped; give weight_decay below "
                             f"1 / lr = {1 / self.lr:g}")
        return self


def sharpen(p: torch.Tensor, *, temperature: float) -> torch.Tensor:
    """p^(1/T) renormalised per row (MixMatch Eq. 7), as a softmax of log(p) / T: the same map up to float rounding
    (which moves trained numbers: revision 1), without p^(1/T)'s underflow to 0 / 0 at a small T."""
    return (p.log() / temperature).softmax(1)


def beta_draw(*, alpha: float, generator: torch.Generator) -> float:
    """One Beta(alpha, alpha) draw by inverse CDF of a uniform from ``generator``."""
    u = float(torch.rand((), generator=generator, device=generator.device))
    return float(betaincinv(alpha, alpha, u))


def ema_decay(step: int, *, ema: float, warmup: bool) -> float:
    """The EMA decay at ``step`` (from 0): ``ema``, capped at (1 + step) / (10 + step) with ``warmup``."""
    return min(ema, (1 + step) / (10 + step)) if warmup else ema


def _unchanged(xs: list[torch.Tensor], _generator: torch.Generator) -> list[torch.Tensor]:
    return xs


def _batch_augmenter(view: AdversaryView, *, rate: float):
    """A step's augmentations of its batches (the labeled one, then the K unlabeled views), drawn in that order: mild
    crops of image halves in one resampling (:func:`augment_images`), else SCARF resampling batch by batch."""
    if view.spec.modality == "image":
        return lambda xs, g: augment_images(xs, generator=g, crop_scale=(0.8, 1.0), flip=False)
    augment = make_augmenter(view.spec, view.local_x, tabular="scarf", rate=rate)
    return lambda xs, g: [augment(x, g) for x in xs]


def _per_step_updates(model: nn.Module, ema: nn.Module, *, decay: float):
    """(decay_weights(), update_ema(m=...)): the weights' decay (each parameter times ``decay``) and the EMA, each one
    kernel on a flat buffer holding the tensors (:func:`flat_ema`) where their dtypes allow, else tensor by tensor."""
    flat = flat_ema(model, ema)
    if flat is None:
        params = list(model.parameters())

        @torch.no_grad()
        def decay_each() -> None:
            for param in params:
                param.mul_(decay)

        return decay_each, momentum_updater(model, ema)
    online, target = flat
    n_params = sum(p.numel() for p in model.parameters())
    weights = online[:n_params]

    @torch.no_grad()
    def update_ema(*, m: float) -> None:
        target.lerp_(online, 1.0 - m)

    return torch.no_grad()(lambda: weights.mul_(decay)), update_ema


class MixMatchCompletion(Attack):
    """Fu et al.'s model completion: bottom + BN-ReLU-Linear head trained with MixMatch, EMA predicts."""

    anchor = "Fu et al. 2022 §4.2 (passive model completion), MixMatch (Berthelot et al. 2019)"
    kind = "model completion"
    #: Tuned leakage +0.070 against mc's +0.030 (splitnn/digits, benchmarks/results/tuned_audit.md); mc-active is
    #: no stronger (benchmarks/results/anchor_attacks) and trains a federation of its own.
    strongest_of_kind = True

    Options = MixMatchOptions
    needs_encoder = True
    #: 240 steps instead of 3000: a quick audit trains it once per (defense strength, seed) and attack. With EMA
    #: 0.999 and no warm-up, 61% of the predicting model is still the random init after 500 steps (0.999^500):
    #: on splitnn/digits (seeds 0-2) that read 0.797; with the warm-up, 240 steps read 0.841 (250: 0.845, 500:
    #: 0.843). Short epochs (12 steps) let successive halving's first round (1/16 of the epochs) cost 12 steps.
    audit_options = {"epochs": 20, "iterations": 12, "ema_warmup": True}
    search_space = {"temperature": (0.5, 0.8), "lambda_u": (5.0, 50.0), "lr": (2e-3, 1e-2)}
    budget_option = "epochs"
    #: 1: sharpening as a softmax of log(p) / T, equal to p^(1/T) up to float rounding, which carries through
    #: training and moves recorded accuracies (review lo5 F1: 0.5472 -> 0.5444); mc-active inherits it.
    revision = 1

    def own_problem(self, spec) -> str:
        """augment_rate resamples tabular features (image halves are cropped instead); without augmentation every
        view is the same sample, so K views are one."""
        image, o = spec.modality == "image", self.options
        if image and o.augment_rate > 0:
            return (f"attack.options.augment_rate={o.augment_rate:g} resamples tabular features; the adversary's are "
                    "images, augmented by crops: leave augment_rate out")
        if not image and o.augment_rate == 0 and o.views not in (1, type(o).model_fields["views"].default):
            return (f"attack.options.views={o.views}: the adversary's tabular features are not augmented "
                    "(augment_rate 0), so every view is the same sample and the guess reads one; set augment_rate "
                    "above 0 too, or leave views out (or 1)")
        return ""

    def infer(self, view: AdversaryView) -> dict[str, Inference]:
        o, g = self.options, view.generator
        model, _ = completed_model(view, head="mlp", train_bottom=True)
        if o.head_init == "ones":  # Fu et al.'s BottomModelPlus: init.ones_ on the head's Linear weights
            with torch.no_grad():
                for layer in model[-1].modules():
                    if isinstance(layer, nn.Linear):
                        layer.weight.fill_(1.0)
        ema = momentum_copy(model)
        decay_weights, update_ema = _per_step_updates(model, ema, decay=1.0 - o.weight_decay * o.lr)
        augmenting = view.spec.modality == "image" or o.augment_rate > 0
        views = o.views if augmenting else 1
        augment = _batch_augmenter(view, rate=o.augment_rate) if augmenting else _unchanged
        opt = make_optimizer(model.parameters(), name="adam", lr=o.lr, weight_decay=0.0)
        n_lab, n_unl, total = view.aux_x.shape[0], view.local_x.shape[0], o.epochs * o.iterations
        aux_onehot = torch.eye(view.num_classes, device=view.device)[view.aux_y]
        per_epoch: list[torch.Tensor] = []
        finite = torch.ones((), dtype=torch.bool, device=view.device)
        model.train()  # throughout: guesses use batch statistics too, as in MixMatch; only the EMA copy predicts
        for step in range(total):
            li = torch.randint(n_lab, (o.batch_size,), generator=g, device=g.device).to(view.device)
            ui = torch.randint(n_unl, (o.batch_size,), generator=g, device=g.device).to(view.device)
            x, *us = augment([view.aux_x[li], *[view.local_x[ui]] * views], g)
            y = aux_onehot[li]
            with torch.inference_mode():
                guess = model(us[0]).softmax(1) if views == 1 else sum(model(u).softmax(1) for u in us) / views
                q = sharpen(guess, temperature=o.temperature)
            inputs, targets = torch.cat([x, *us]), torch.cat([y, *[q] * len(us)])
            lam = beta_draw(alpha=o.alpha, generator=g)
            lam = max(lam, 1.0 - lam)
            perm = torch.randperm(inputs.shape[0], generator=g, device=g.device).to(view.device)
            mixed_x = lam * inputs + (1 - lam) * inputs[perm]
            mixed_t = lam * targets + (1 - lam) * targets[perm]
            logits = model(mixed_x)
            b = o.batch_size
            loss_x = -(F.log_softmax(logits[:b], 1) * mixed_t[:b]).sum(1).mean()
            loss_u = (logits[b:].softmax(1) - mixed_t[b:]).pow(2).mean()
            ramp = min(1.0, (step + 1) / total)
            loss = loss_x + o.lambda_u * ramp * loss_u
            finite &= torch.isfinite(loss)  # on device: no sync per step
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if o.weight_decay:
                decay_weights()
            update_ema(m=ema_decay(step, ema=o.ema, warmup=o.ema_warmup))
            if o.report_best_epoch_on_targets and (step + 1) % o.iterations == 0:
                per_epoch.append(apply_in_batches(ema, view.targets["test"]).argmax(1))
        require_finite(finite, "the MixMatch training loss")
        out = {name: guesses(apply_in_batches(ema, x), num_classes=view.num_classes) for name, x in view.targets.items()}
        out["test"].per_epoch = per_epoch
        return out
