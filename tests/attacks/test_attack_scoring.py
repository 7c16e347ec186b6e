"""Norm and direction scoring (Li et al. 2022) and the runner-side scores (leak AUC, best threshold)."""

import pytest
import torch
from attack_helpers import gradient_view
from torch import nn

from vflpriv.attacks.base import AdversaryView
from vflpriv.attacks.labels.gradient_scoring import DirectionOptions, DirectionScoring, NormOptions, NormScoring
from vflpriv.common import metrics
from vflpriv.common.errors import IncompatibleError
from vflpriv.config.schema import RunConfig
from vflpriv.data.base import PartySpec
from vflpriv.engine import FINETUNE, GRADIENT, Inbox, Received
from vflpriv.runner.planning import plan
from vflpriv.runner.scoring import best_threshold_accuracy, hungarian_accuracy, leak_auc


def _binary_view(*, seed: int = 0, n: int = 300):
    """Positives (class 1, rare) get larger gradients of the opposite sign along one direction."""
    g = torch.Generator().manual_seed(seed)
    y = (torch.rand(n, generator=g) < 0.3).long()
    axis = torch.randn(12, generator=g)
    scale = torch.where(y == 1, 2.0, -0.5)[:, None]
    grads = scale * axis + 0.05 * torch.randn(n, 12, generator=g)
    y_aux = torch.arange(20) % 2
    feats = torch.cat([y, y_aux])[:, None].float() + 0.1 * torch.randn(n + 20, 3, generator=g)
    return gradient_view(grads, labels_aux=y_aux, feats_train=feats[:n], feats_aux=feats[n:], num_classes=2, epochs=2), y


@pytest.mark.parametrize("attack", [NormScoring(NormOptions()), DirectionScoring(DirectionOptions(proxy_epochs=30))])
def test_scoring_attacks_separate_classes_when_gradients_do(attack):
    view, y = _binary_view()
    out = attack.infer(view)["train"]
    assert metrics.auc(out.scores, y) > 0.99 and leak_auc(out.batch_scores, y) > 0.99
    assert metrics.accuracy(out.predictions, y) > 0.95


def test_norm_orientation_option_flips_the_scores():
    view, y = _binary_view()
    flipped = NormScoring(NormOptions(larger_norm_class=0)).infer(view)["train"]
    assert metrics.auc(flipped.scores, y) < 0.01


def test_leak_auc_averages_only_batches_with_both_classes():
    y = torch.tensor([0, 1, 1, 0, 1, 1])
    batches = [(torch.tensor([0, 1]), torch.tensor([0.1, 0.9])),   # AUC 1
               (torch.tensor([2, 4]), torch.tensor([0.3, 0.2])),   # positives only: skipped
               (torch.tensor([3, 5]), torch.tensor([0.8, 0.2]))]   # AUC 0
    assert leak_auc(batches, y) == pytest.approx(0.5)


def test_best_threshold_and_hungarian_scores():
    y = torch.tensor([0, 0, 1, 1, 1])
    assert best_threshold_accuracy(torch.tensor([0.1, 0.2, 0.3, 0.4, 0.5]), y) == 1.0
    assert best_threshold_accuracy(torch.tensor([0.5, 0.5, 0.5, 0.5, 0.5]), y) == pytest.approx(0.6)
    assert hungarian_accuracy(torch.tensor([2, 2, 0, 0, 1]), y) == pytest.approx(0.8)


@pytest.mark.parametrize("attack", ["norm", "direction"])
def test_binary_attacks_are_refused_on_a_multiclass_task(attack):
    with pytest.raises(IncompatibleError, match="binary"):
        plan(RunConfig.model_validate({"attack": {"name": attack}}))


def _view_with_aux_gradients(*, received: bool, scale: tuple[float, float] = (-1.0, 1.0)):
    """Targets whose features mislead any aux-trained proxy (feature = 1 - label, aux: feature = label);
    their gradients are ``scale[y] * axis`` (+ noise). With ``received``, the auxiliary samples' own
    gradients arrive too, mixed into the batches of the first epoch only (ids n.., not targets)."""
    g = torch.Generator().manual_seed(0)
    n, n_aux = 300, 20
    y, y_aux = (torch.rand(n, generator=g) < 0.4).long(), torch.arange(n_aux) % 2
    axis = torch.randn(12, generator=g)
    grads = torch.tensor(scale)[torch.cat([y, y_aux])][:, None] * axis + 0.05 * torch.randn(n + n_aux, 12, generator=g)
    inbox = Inbox(owner=1, wanted={(GRADIENT, FINETUNE)})
    for epoch in range(2):
        ids = torch.arange(n + n_aux) if epoch == 0 and received else torch.arange(n)
        for batch in ids[torch.randperm(ids.numel(), generator=g)].split(50):
            inbox.received.append(Received(GRADIENT, FINETUNE, 0, epoch, batch, grads[batch]))
    feats = torch.cat([1 - y, y_aux])[:, None].float() + 0.1 * torch.randn(n + n_aux, 3, generator=g)
    view = AdversaryView(
        party=1, phase=FINETUNE, num_classes=2, spec=PartySpec("tabular", (3,)), encoder=nn.Identity(),
        local_x=feats[:n], aux_x=feats[n:], aux_y=y_aux, aux_ids=torch.arange(n, n + n_aux),
        targets={"train": feats[:n]}, target_ids={"train": torch.arange(n)}, inbox=inbox,
        generator=torch.Generator().manual_seed(0), device=torch.device("cpu"),
    )
    return view, y


def test_direction_reference_is_a_received_auxiliary_positive_gradient():
    """A received aux positive's gradient is the reference, in its batch and the batches near it in
    time; only without one does the (here misled) aux-trained proxy choose the reference."""
    attack = DirectionScoring(DirectionOptions(proxy_epochs=30))
    with_aux, y = _view_with_aux_gradients(received=True)
    out = attack.infer(with_aux)["train"]
    assert leak_auc(out.batch_scores, y) > 0.99 and metrics.accuracy(out.predictions, y) > 0.99
    without, y = _view_with_aux_gradients(received=False)
    misled = attack.infer(without)["train"]
    assert leak_auc(misled.batch_scores, y) < 0.01


def test_norm_orientation_auto_follows_the_received_auxiliary_gradients():
    """Class 0 has the larger gradients here: an adversary that received auxiliary gradients sees it and
    scores class 1 by a small norm; without them it keeps Li et al.'s premise (class 1 larger) and inverts."""
    attack = NormScoring(NormOptions())
    informed, y = _view_with_aux_gradients(received=True, scale=(-3.0, 0.5))
    out = attack.infer(informed)["train"]
    assert metrics.auc(out.scores, y) > 0.99 and metrics.accuracy(out.predictions, y) > 0.95
    uninformed, y = _view_with_aux_gradients(received=False, scale=(-3.0, 0.5))
    assert metrics.auc(attack.infer(uninformed)["train"].scores, y) < 0.01
