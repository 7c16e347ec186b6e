"""Gradient clustering: perfect on class-separated gradients, chance on label-free ones, and the
adversary's aux-named accuracy never above the Hungarian upper bound (REFERENCE.md §7, §12)."""

import pytest
import torch
from attack_helpers import blobs, gradient_view

from vflpriv.attacks.labels.gradient_clustering import GradientClustering, GradientClusteringOptions
from vflpriv.common import metrics
from vflpriv.models.kmeans import kmeans
from vflpriv.runner.scoring import hungarian_accuracy

C = 4


def _case(*, separated: bool, seed: int, n: int = 400, n_aux: int = 40):
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % C
    y_aux = torch.arange(n_aux) % C
    feats = blobs(torch.cat([y, y_aux]), dim=6, spread=0.3, generator=g)
    grad_labels = y if separated else torch.randint(C, (n,), generator=g)
    grads = blobs(grad_labels, dim=16, spread=0.05 if separated else 3.0, generator=g)
    view = gradient_view(grads, labels_aux=y_aux, feats_train=feats[:n], feats_aux=feats[n:], num_classes=C, seed=seed)
    return view, y


def _scores(view, y, **options):
    out = GradientClustering(GradientClusteringOptions(**options)).infer(view)["train"]
    return metrics.accuracy(out.predictions, y), hungarian_accuracy(out.clusters, y)


@pytest.mark.parametrize("normalize", [True, False])
def test_class_separated_gradients_are_recovered_exactly(normalize):
    view, y = _case(separated=True, seed=0)
    aux_acc, hungarian = _scores(view, y, normalize=normalize)
    assert hungarian == 1.0 and aux_acc == 1.0


def test_label_independent_gradients_score_chance():
    view, y = _case(separated=False, seed=1)
    aux_acc, hungarian = _scores(view, y)
    assert abs(hungarian - 1 / C) < 0.08 and abs(aux_acc - 1 / C) < 0.08


@pytest.mark.parametrize("seed", range(6))
def test_aux_named_accuracy_never_exceeds_hungarian(seed):
    view, y = _case(separated=seed % 2 == 0, seed=seed)
    for choice in ("first", "last", "mean"):
        aux_acc, hungarian = _scores(view, y, gradients_from=choice)
        assert aux_acc <= hungarian + 1e-12


def test_epoch_choice_picks_the_right_rows():
    """Epoch 0 carries the class signal, epoch 1 pure noise: 'first' recovers it, 'last' cannot."""
    view, y = _case(separated=True, seed=2)
    noisy = torch.randn(400, 16, generator=torch.Generator().manual_seed(9)) * 50
    for r in list(view.inbox.received):
        view.inbox.received.append(r.__class__(r.kind, r.phase, r.sender, 1, r.sample_ids, noisy[r.sample_ids]))
    assert _scores(view, y, gradients_from="first")[1] == 1.0
    assert _scores(view, y, gradients_from="last")[1] < 0.5


def test_kmeans_is_seeded_and_finds_separated_blobs():
    g = torch.Generator().manual_seed(3)
    y = torch.arange(300) % 5
    x = blobs(y, dim=3, spread=0.01, generator=g)
    a = kmeans(x, k=5, generator=torch.Generator().manual_seed(0))
    b = kmeans(x, k=5, generator=torch.Generator().manual_seed(0))
    assert torch.equal(a.labels, b.labels) and hungarian_accuracy(a.labels, y) == 1.0


def test_gc_is_refused_when_the_method_sends_no_gradients():
    from vflpriv.common.errors import IncompatibleError
    from vflpriv.config.registry import METHODS
    from vflpriv.config.schema import RunConfig
    from vflpriv.methods.base import Method
    from vflpriv.runner.planning import plan

    class FrozenBottoms(Method):
        sends = frozenset({("passive", "embedding", "finetune"), ("passive", "embedding", "inference")})

    METHODS.register("test-frozen-bottoms", FrozenBottoms)
    with pytest.raises(IncompatibleError, match="gradient messages"):
        plan(RunConfig.model_validate({"method": {"name": "test-frozen-bottoms"}, "attack": {"name": "gc"}}))
    plan(RunConfig.model_validate({"attack": {"name": "gc"}}))  # splitnn sends them
