"""Label DP by randomised response: labels change at rate 1 - e^eps / (e^eps + C - 1), uniformly to the
other classes; the swept epsilon is recorded with its axis (lower = stronger)."""

import dataclasses
import math
from types import SimpleNamespace

import pytest
import torch

from vflpriv.common.errors import ConfigError
from vflpriv.config.schema import RunConfig
from vflpriv.defenses.label_dp import LabelDP, keep_probability
from vflpriv.runner.execution import run
from vflpriv.runner.planning import plan


def _label_dp(epsilon, party=0, seed=0):
    return LabelDP(strength=epsilon, party=party, phase="finetune", kinds=None, options=LabelDP.Options(),
                   generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("epsilon,classes", [(0.0, 10), (1.0, 10), (2.0, 2), (4.0, 5)])
def test_flip_rate_and_uniform_replacement(epsilon, classes):
    n = 60000
    y = torch.arange(n) % classes
    noisy = _label_dp(epsilon).relabel(y, num_classes=classes)
    keep = math.exp(epsilon) / (math.exp(epsilon) + classes - 1)
    assert keep_probability(epsilon=epsilon, num_classes=classes) == pytest.approx(keep)
    flipped = noisy != y
    assert flipped.double().mean().item() == pytest.approx(1 - keep, abs=0.01)
    shift = ((noisy - y) % classes)[flipped]  # which other class: uniform over 1..C-1
    counts = torch.bincount(shift, minlength=classes)[1:].double()
    assert (counts - counts.mean()).abs().max() < 5 * counts.mean().sqrt()  # multinomial noise only


@dataclasses.dataclass(frozen=True)
class _Active:
    labels: torch.Tensor


class _Federation(SimpleNamespace):
    @property
    def active(self):
        return self.parties[0]


def test_bind_relabels_only_known_labels_and_infinite_epsilon_is_identity():
    labels = torch.tensor([-1, 0, 1, 2, -1, 1] * 500)
    fed = _Federation(parties=[_Active(labels)], num_classes=3)
    _label_dp(0.5).bind(fed)
    new = fed.active.labels
    assert torch.equal(new == -1, labels == -1) and not torch.equal(new, labels)
    fed = _Federation(parties=[_Active(labels)], num_classes=3)
    _label_dp(math.inf).bind(fed)
    assert fed.active.labels is labels


def test_label_dp_protects_the_active_party_only():
    with pytest.raises(ConfigError, match="active party"):
        _label_dp(1.0, party=1)


def test_several_defenses_in_one_run_all_act_and_the_swept_axis_is_recorded(monkeypatch):
    """Each of the three changes what crosses: the adversary's received gradients are sparse (sparsify after ISO's
    noise) and differ from those with ISO at its identity; the active party trains on relabelled targets."""
    from vflpriv.defenses.sparsify import Sparsify

    seen = []
    real = Sparsify.transform

    def spy(self, tensor, message):
        out = real(self, tensor, message)
        seen.append((tensor.clone(), out.clone()))
        return out

    monkeypatch.setattr(Sparsify, "transform", spy)

    def config(*defenses):
        return RunConfig.model_validate({
            "partition": {"labeled": 60, "aux": 20}, "model": {"hidden": 32, "out_dim": 16},
            "finetune": {"epochs": 2, "batch_size": 32}, "attack": {"name": "gc", "prior": "none"},
            "defenses": list(defenses)})

    iso, sparsify = {"name": "iso", "strength": 1.0}, {"name": "sparsify", "strength": 90.0}
    label_dp = {"name": "label-dp", "strength": 2.0, "sweep": True}
    (rec,) = run(config(iso, sparsify, label_dp))
    assert rec.status == "ok" and rec.defense == "label-dp" and rec.strength == 2.0
    assert (rec.strength_axis, rec.strength_stronger) == ("epsilon", "lower")
    before, after = seen[0]
    assert (after == 0).double().mean() >= 0.89 and (before != 0).all()  # sparsify acted, on a dense noisy input
    first_with_iso = before
    seen.clear()
    run(config({"name": "iso", "strength": 0.0}, sparsify, label_dp))  # ISO at its identity, every stream the same
    assert not torch.allclose(seen[0][0], first_with_iso)  # ISO's noise was on the first gradient
    p = plan(config(iso, sparsify, label_dp))
    fed_labels = p.scenario.dataset.y_train
    from vflpriv.runner.execution import build_federation

    fed = build_federation(p)
    known = fed.active.label_ids
    assert (fed.active.labels[known] != fed_labels[known]).any()  # label-dp relabelled some of the labels


@pytest.mark.parametrize("name", ["label-dp", "iso", "max-norm", "sparsify"])
def test_a_defense_without_a_strength_is_its_identity(name):
    """Unset strength means no protection on the defense's own axis (epsilon +inf, noise scale 0)."""
    (defense,) = plan(RunConfig.model_validate({"defenses": [{"name": name}]})).defenses
    assert defense.is_identity and defense.strength == defense.axis.identity
