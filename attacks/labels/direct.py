"""Direct label inference (DLI) from the sign of each received gradient row.

VFLAIR ``src/evaluates/attacks/DirectLabelScoring.py``; Fu et al. ``Code/vfl_framework.py`` (its
``direct_attack_on`` block); Kang et al. ``privacy_attack_during_training/DLI_label_recovery.py`` (binary).
When the adversary's bottom ends in one unit per class and the active party's top is the sum of the parties'
logits (aggVFL, ``finetune.top=sum``), the gradient it receives for sample i is
G_i = (softmax(sum_k z_k)_i - onehot(y_i)) / B, whose only negative entry is the true class: the rule "the class
of the first negative entry" recovers every label with no defense. Under a trained top the gradient is
(softmax - onehot(y)) W_p^T / B and the rule guesses; VFLAIR still runs it there (its trainable-head configs).
A row with no negative entry gets a random class (VFLAIR's ``randint``; here from the view's generator), except
under the sum top, which the adversary knows it takes part in: there such a row comes from a saturated softmax
(in float32 the true class's p - 1 rounds to 0 while the other entries stay tiny and positive), so it gets its
smallest entry, at random among ties (only a row of zeros says nothing). Measured on breast-cancer with aggVFL
and FedBCD Q = 5, whose faster training saturates: VFLAIR's random 0.971 over 3 seeds, the smallest entry 1.000;
under a trained top, where the argument does not hold, the smallest entry did worse than random (0.550 against
0.763 and 0.792 for two draws of random, with two outputs), hence random there.

Scope: VFLAIR reads the first batch of epoch 0, Fu et al. every batch; here every received gradient, each
sample's from its first epoch by default (``gradients_from``), so every train target whose gradient arrived is
guessed (the others are not scored). The rule needs one gradient entry per class: the adversary's embedding
must have ``num_classes`` units (``finetune.top=sum``, or ``model.out_dim`` equal to the number of classes).
"""

from __future__ import annotations

import torch
from pydantic import Field

from vflpriv.attacks.base import AdversaryView, Inference
from vflpriv.attacks.labels.gradients import EpochChoice, GradientAttack, per_sample
from vflpriv.config.options import Options


class DirectLabelOptions(Options):
    gradients_from: EpochChoice = Field("first", description="each sample's gradient from its first or last epoch, or "
                                        "the mean (VFLAIR: the first batch of epoch 0)")


def sign_rule(rows: torch.Tensor, *, generator: torch.Generator, saturated: bool = False) -> torch.Tensor:
    """Per row, the first class whose entry is negative; for a row with none, a random class (VFLAIR), or with
    ``saturated`` (rows are softmax - onehot) the smallest entry, at random among ties (a row of zeros says nothing)."""
    negative = rows < 0
    first = negative.int().argmax(1)  # the first True; 0 for a row with none
    candidates = rows == rows.min(1, keepdim=True).values if saturated else torch.ones_like(negative)
    draw = torch.rand(rows.shape, generator=generator, device=generator.device).to(rows.device)
    fallback = (draw * candidates).argmax(1)  # uniformly among the candidates
    return torch.where(negative.any(1), first, fallback)


class DirectLabelInference(GradientAttack):
    """The class of each received gradient row's first negative entry."""

    Options = DirectLabelOptions
    needs_aux = False
    untunable = "a fixed sign rule on each gradient row: no hyperparameter for auxiliary labels to select"
    anchor = "VFLAIR DirectLabelScoring.py; Fu et al. vfl_framework.py (direct attack); Kang et al. DLI_label_recovery.py"

    def incompatible(self, run, *, num_classes: int) -> str:
        if run.finetune.top == "sum" or run.model.out_dim == num_classes:
            return ""
        return (f"the sign rule reads one gradient entry per class, but the adversary's embedding has "
                f"model.out_dim={run.model.out_dim} units for {num_classes} classes; use finetune.top=sum (aggVFL) or "
                f"model.out_dim={num_classes}")

    def infer(self, view: AdversaryView) -> dict[str, Inference]:
        n = view.target_ids["train"].numel()
        grads, received = per_sample(self.batches(view), n=n, epochs=self.options.gradients_from)
        aggregated = view.recipe is not None and view.recipe.top == "sum"
        predictions = sign_rule(grads, generator=view.generator, saturated=aggregated)
        # the chosen entry's pull: softmax - one-hot is -(1 - p_y) at the true class, so a more negative one is surer
        inference = Inference(predictions=predictions, covered=received,
                              confidence=-grads.gather(1, predictions[:, None]).squeeze(1))
        if view.num_classes == 2:  # the positive class's entry is negative exactly for its own samples
            inference.scores = -grads[:, 1]
        return {"train": inference}
