"""Model completion (FedHSSL §VI-B; Fu et al. 2022; REFERENCE.md §9).

The adversary completes its bottom model f^2 (the snapshot of the attacked phase) with an inference
head g^2 trained on its auxiliary labels D_aux, and predicts y = g^2(f^2(x)) for its targets.

- Kang et al. style (the FedHSSL authors' pipeline; the default): bottom frozen, one Linear head,
  Adam lr 0.005, weight decay 1e-6, batch 64, 300 epochs.
- Fu et al. style (supervised part; ``mc-mixmatch`` adds their semi-supervised training): bottom
  fine-tuned together with a head BN -> ReLU -> Linear (``head=mlp``, ``train_bottom=true``).

The final epoch is reported. ``report_best_epoch_on_targets`` keeps each epoch's guesses on the test
targets so the runner can also report the best epoch chosen *on the target labels* (what both public
codes print; optimistic), in its own column ``attack_accuracy_optimistic``.
"""

from __future__ import annotations

import copy
from typing import Callable, Literal

import torch
from pydantic import Field
from torch import nn

from vflpriv.attacks.base import AdversaryView, Attack, Inference
from vflpriv.config.options import Options
from vflpriv.models.encoders import init_parameters
from vflpriv.models.training import apply_in_batches, fit_classifier, require_finite

HEADS: dict[str, Callable[[int, int], nn.Module]] = {
    "linear": lambda dim, classes: nn.Linear(dim, classes),
    "mlp": lambda dim, classes: nn.Sequential(nn.BatchNorm1d(dim), nn.ReLU(), nn.Linear(dim, classes)),
}


class ModelCompletionOptions(Options):
    head: Literal["linear", "mlp"] = Field("linear", description="linear (Kang et al.) or BN->ReLU->Linear (Fu et al.)")
    train_bottom: bool = Field(False, description="fine-tune the bottom model with the head (Fu et al.)")
    epochs: int = Field(300, ge=1)
    lr: float = Field(0.005, gt=0)
    weight_decay: float = Field(1e-6, ge=0)
    batch_size: int = Field(64, ge=2)
    report_best_epoch_on_targets: bool = Field(
        False, description="also report the best epoch selected on the test targets' labels (optimistic)"
    )


def make_head(kind: str, *, in_dim: int, num_classes: int, generator: torch.Generator) -> nn.Module:
    return init_parameters(HEADS[kind](in_dim, num_classes), generator=generator)


def guesses(logits: torch.Tensor, *, num_classes: int) -> Inference:
    """Predicted labels, their softmax probability as the confidence, plus positive-class scores for binary tasks;
    non-finite logits fail the attack."""
    require_finite(logits, "the attack's logits")
    probabilities = logits.softmax(1)
    confidence, predictions = probabilities.max(1)
    scores = probabilities[:, 1] if num_classes == 2 else None
    return Inference(predictions=predictions, scores=scores, confidence=confidence)


def completed_model(
    view: AdversaryView, *, head: str, train_bottom: bool
) -> tuple[nn.Module, Callable[[torch.Tensor], torch.Tensor]]:
    """(model, inputs): the trainable part and the map from raw local features to its inputs.

    Frozen bottom: the model is the head alone and its inputs are the bottom's features, computed
    once. Fine-tuned bottom: the model is a trainable copy of the bottom followed by the head.
    """
    encoder = view.encoder
    out_dim = int(apply_in_batches(encoder, view.aux_x[:2]).shape[1])
    g2 = make_head(head, in_dim=out_dim, num_classes=view.num_classes, generator=view.generator).to(view.device)
    if train_bottom:
        bottom = copy.deepcopy(encoder).requires_grad_(True)
        return nn.Sequential(bottom, g2), lambda x: x
    return g2, lambda x: apply_in_batches(encoder, x)


class ModelCompletion(Attack):
    """The adversary's bottom snapshot + a head fitted on its auxiliary labels."""

    anchor = "Kang et al. (FedHSSL pipeline), Fu et al. 2022 (supervised part)"
    kind = "model completion"

    Options = ModelCompletionOptions
    needs_encoder = True
    search_space = {"head": ("linear", "mlp"), "train_bottom": (False, True), "lr": (0.005, 0.05)}
    budget_option = "epochs"

    def infer(self, view: AdversaryView) -> dict[str, Inference]:
        opts = self.options
        model, inputs = completed_model(view, head=opts.head, train_bottom=opts.train_bottom)
        targets = {name: inputs(x) for name, x in view.targets.items()}
        per_epoch: list[torch.Tensor] = []

        def keep(_epoch: int, m: nn.Module) -> None:
            per_epoch.append(apply_in_batches(m, targets["test"]).argmax(1))

        fit_classifier(
            model, inputs(view.aux_x), view.aux_y,
            epochs=opts.epochs, lr=opts.lr, weight_decay=opts.weight_decay, batch_size=opts.batch_size,
            generator=view.generator, on_epoch=keep if opts.report_best_epoch_on_targets else None,
            what="attack's completed model",
        )
        out = {name: guesses(apply_in_batches(model, x), num_classes=view.num_classes) for name, x in targets.items()}
        out["test"].per_epoch = per_epoch
        return out


def proxy_positive(view: AdversaryView, x: torch.Tensor, *, epochs: int) -> torch.Tensor:
    """P(class 1) of the rows ``x`` under the adversary's own completion proxy: its bottom snapshot, frozen, and a
    Linear head fitted on its auxiliary labels (``mc``'s recipe). Binary attacks use it where the gradients leave
    a choice they cannot make themselves (which batch member is positive; which way a surrogate is oriented)."""
    model, inputs = completed_model(view, head="linear", train_bottom=False)
    fit_classifier(model, inputs(view.aux_x), view.aux_y, epochs=epochs, lr=0.005, weight_decay=1e-6, batch_size=64,
                   generator=view.generator, what="the adversary's proxy head")
    return apply_in_batches(model, inputs(x)).softmax(1)[:, 1]
