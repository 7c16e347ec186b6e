"""What an attack's numbers are computed on: the targets it covered (and its prior on exactly those), the best epoch
by hand, the search's holdout kept out of every trial's training, the refit (not the oracle) as the accuracy, and
A_SimSiam's frozen encoder."""

from __future__ import annotations

import pytest
import torch
from attack_helpers import gradient_view
from pydantic import Field
from torch import nn

import vflpriv.runner.attacking as attacking
from vflpriv.attacks.base import Attack
from vflpriv.attacks.search import SearchResult, Trial, search
from vflpriv.config.options import Options
from vflpriv.config.schema import RunConfig
from vflpriv.data.load import load_dataset
from vflpriv.engine.adversary import HOLDOUT, Inference
from vflpriv.runner.execution import run
from vflpriv.runner.prior import simsiam_prior
from vflpriv.runner.scoring import score_attack
from vflpriv.store.records import RunRecord

TINY = {"model": {"hidden": 64, "out_dim": 32}, "finetune": {"epochs": 3, "batch_size": 32},
        "attack": {"prior": "aux", "prior_epochs": 5}}


def _record() -> RunRecord:
    return RunRecord(key="k", method="m", dataset="d", attack="a", defense="none", phase="finetune", strength=0.0,
                     seed=0)


def test_bli_and_its_prior_are_scored_on_the_batch_it_covered_only(monkeypatch):
    """The prior is made right on exactly the covered targets and wrong elsewhere: its accuracy must be 1."""
    seen = {}
    real_score = attacking.score_attack

    def spy_score(record, inferences, truth, hidden=None):
        seen["covered"] = real_score(record, inferences, truth, hidden)
        return seen["covered"]

    def rigged_prior(prior, view, attack, truth):
        out = {name: (y + 1) % view.num_classes for name, y in truth.items()}
        primary = "test" if "test" in seen["inferences"] else "train"
        out[primary] = torch.where(seen["covered"], truth[primary], out[primary])
        return out

    from vflpriv.attacks.labels.batch_reconstruction import BatchLabelInference

    bli_infer = BatchLabelInference.infer

    def spy_infer(self, view):
        seen["inferences"] = bli_infer(self, view)
        return seen["inferences"]

    monkeypatch.setattr(attacking, "score_attack", spy_score)
    monkeypatch.setattr(attacking, "prior_predictions", rigged_prior)
    monkeypatch.setattr(BatchLabelInference, "infer", spy_infer)
    cfg = RunConfig.model_validate({**TINY, "attack": {**TINY["attack"], "name": "bli", "options": {"iterations": 30}},
                                    "finetune": {**TINY["finetune"], "top": "sum"}})
    (record,) = run(cfg)
    assert record.status == "ok", record.error
    total = seen["covered"].numel()
    assert record.n_targets == 32 < total  # one batch of the targets
    assert record.prior_accuracy == 1.0 and record.prior_hits == "1" * 32 and len(record.attack_hits) == 32
    assert record.leakage == pytest.approx(record.attack_accuracy - 1.0)


def test_the_optimistic_accuracy_is_the_best_epoch_on_the_covered_targets():
    truth = torch.tensor([0, 1, 2, 0, 1, 2])
    covered = torch.tensor([True, True, True, False, False, True])
    epochs = [torch.tensor([0, 1, 0, 0, 1, 2]),  # covered: 3 of 4 right (all 6 right: 5 of 6)
              torch.tensor([0, 0, 0, 1, 0, 0]),  # covered: 1 of 4
              torch.tensor([1, 1, 2, 0, 1, 2])]  # covered: 3 of 4 (all: 5 of 6)
    inference = Inference(predictions=epochs[1], covered=covered, per_epoch=epochs)
    record = _record()
    score_attack(record, {"test": inference}, {"test": truth})
    assert record.attack_accuracy == 0.25 and record.attack_accuracy_optimistic == 0.75


class SpyOptions(Options):
    neighbours: int = Field(1, ge=1)


class NearestAux(Attack):
    """k-NN on the auxiliary rows it is given; records which auxiliary samples each call trained on."""

    Options = SpyOptions
    search_space = {"neighbours": (1, 3)}
    calls: list = []

    def infer(self, view):
        NearestAux.calls.append((view.aux_ids.clone(), view.target_ids.get(HOLDOUT), view.aux_x.clone()))
        out = {}
        for name, x in view.targets.items():
            nearest = torch.cdist(x, view.aux_x).topk(self.options.neighbours, largest=False).indices
            out[name] = Inference(predictions=view.aux_y[nearest].mode(dim=1).values)
        return out


def test_no_trial_trains_on_the_holdout_it_is_scored_on_and_the_refit_uses_every_aux_label():
    NearestAux.calls = []
    g = torch.Generator().manual_seed(0)
    y_aux = torch.arange(40) % 4
    feats_aux = torch.randn(40, 6, generator=g)
    view = gradient_view(torch.randn(20, 5, generator=g), labels_aux=y_aux, feats_train=torch.randn(20, 6, generator=g),
                         feats_aux=feats_aux, num_classes=4)
    found = search(NearestAux(SpyOptions()), view, budget=8, seed=0)
    *trials, refit = NearestAux.calls
    assert len(trials) == 2 and all(t.aux_accuracy < 1.0 for t in found.trials)  # 1-NN on itself would score 1
    for aux_ids, held_ids, aux_x in trials:
        assert held_ids is not None and not set(aux_ids.tolist()) & set(held_ids.tolist())
        assert sorted(aux_ids.tolist() + held_ids.tolist()) == sorted(view.aux_ids.tolist())
        assert torch.equal(aux_x, feats_aux[aux_ids - view.aux_ids[0]])  # the rows of those ids, not others
    assert refit[1] is None and torch.equal(refit[0], view.aux_ids)


def test_the_recorded_accuracy_is_the_refit_s_and_the_oracle_is_the_best_trial_on_the_targets(monkeypatch):
    cfg = RunConfig.model_validate({
        "dataset": {"name": "digits"}, "partition": {"labeled": 60, "aux": 40}, "model": {"hidden": 32, "out_dim": 16},
        "finetune": {"epochs": 1, "batch_size": 32}, "attack": {"name": "mc", "prior": "none", "tune": True}})
    y_test = load_dataset(cfg.dataset, parties=2).y_test
    refit = {"test": Inference(predictions=torch.zeros_like(y_test))}
    perfect = Trial({"lr": 1.0}, 1.0, 0.1, {"test": Inference(predictions=y_test.clone())})
    monkeypatch.setattr(attacking, "tuned", lambda a, view, **_: SearchResult({}, refit, [perfect], "rigged"))
    (record,) = run(cfg)
    assert record.status == "ok", record.error
    assert record.attack_accuracy == pytest.approx(float((y_test == 0).double().mean()))
    assert record.attack_accuracy_oracle == 1.0


class _Encoder(nn.Module):
    out_dim = 4

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 4))

    def forward(self, x):
        return self.net(x)


def test_a_simsiam_s_head_leaves_the_adversary_s_own_encoder_frozen():
    g = torch.Generator().manual_seed(0)
    y_aux = torch.arange(40) % 4
    view = gradient_view(torch.randn(20, 5, generator=g), labels_aux=y_aux, feats_train=torch.randn(20, 6, generator=g),
                         feats_aux=torch.randn(40, 6, generator=g), num_classes=4)
    torch.manual_seed(0)
    encoder = _Encoder().train()
    before = {k: v.clone() for k, v in encoder.state_dict().items()}
    guesses = simsiam_prior(view, attack=None, model=None, own_encoder=lambda: encoder, epochs=20,
                            generator=torch.Generator().manual_seed(1))
    assert set(guesses) == {"train"}
    after = encoder.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # weights and BatchNorm statistics alike
