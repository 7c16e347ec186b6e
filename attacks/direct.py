"""Direct label inference (DLI) from the sign of each received gradient row.

VFLAIR ``src/evaluates/attacks/DirectLabelScoring.py``; Fu et al. ``Code/vfl_framework.py`` (its
``direct_attack_on`` block); Kang et al. ``privacy_attack_during_training/DLI_label_recovery.py`` (binary).
When the adversary's bottom ends in one unit per class and the active party's top is the sum of the parties'
logits (aggVFL, ``finetune.top=sum``), the gradient it receives for sample i is
G_i = (softmax(sum_k z_k)_i - onehot(y_i)) / B, whose only negative entry is the true class: the rule "the class
of the first negative entry" recovers every label with no defense. Under a trained top the gradient is
(softmax - onehot(y)) W_p^T / B and the rule guesses; VFLAIR still runs it there (its trainable-head configs).
A row with no negative entry gets a random class (VFLAIR's ``randint``; here from the view's generator).

Scope: VFLAIR reads the first batch of epoch 0, Fu et al. every batch; here every received gradient, each
sample's from its first epoch by default (``gradients_from``), so every train target whose gradient arrived is
guessed (the others are not scored). The rule needs one gradient entry per class: the adversary's embedding
must have ``num_classes`` units (``finetune.top=sum``, or ``model.out_dim`` equal to the number of classes).
"""

from __future__ import annotations

import torch
from pydantic import Field

from vflpriv.attacks.base import AdversaryView, Inference
from vflpriv.attacks.gradients import EpochChoice, GradientAttack, per_sample
from vflpriv.options import Options


class DirectLabelOptions(Options):
    gradients_from: EpochChoice = Field("first", description="each sample's gradient from its first or last epoch, or "
                                        "the mean (VFLAIR: the first batch of epoch 0)")


def sign_rule(rows: torch.Tensor, *, generator: torch.Generator) -> torch.Tensor:
    """Per row, the first class whose entry is negative; a random class for a row with none (VFLAIR)."""
    negative = rows < 0
    first = negative.int().argmax(1)  # the first True; 0 for a row with none
    random = torch.randint(rows.shape[1], (rows.shape[0],), generator=generator, device=generator.device)
    return torch.where(negative.any(1), first, random.to(rows.device))


class DirectLabelInference(GradientAttack):
    """The class of each received gradient row's first negative entry."""

    Options = DirectLabelOptions
    needs_aux = False
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
        predictions = sign_rule(grads, generator=view.generator)
        inference = Inference(predictions=predictions, covered=received)
        if view.num_classes == 2:  # the positive class's entry is negative exactly for its own samples
            inference.scores = -grads[:, 1]
        return {"train": inference}
