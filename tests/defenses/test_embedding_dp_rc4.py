"""Review rowcheck4's false epsilons in embedding-dp (issue 47): each test is its repro, made small."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

from vflpriv.config.schema import RunConfig
from vflpriv.defenses.private_rows import PrivateRows
from vflpriv.engine import ACTIVE, EMBEDDING, INFERENCE, Message
from vflpriv.methods.finetune import predict
from vflpriv.methods.splitnn import SplitNN
from vflpriv.methods.vflhlp import VFLHLPActive
from vflpriv.runner.execution import run

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "methods"))
from pretrain_helpers import build_federation  # noqa: E402
from test_embedding_dp import _config  # noqa: E402
from test_embedding_dp_premise import _prepend  # noqa: E402


def _release_training_rows(fed, trained) -> None:
    """Every training row of the victim once more through its noised bottom, with no ids, tagged INFERENCE."""
    p = fed.parties[1]
    with torch.no_grad():
        h = trained.bottoms[1](p.x_train[fed.labeled_aligned()])
    fed.channel.send(Message(EMBEDDING, INFERENCE, 1, ACTIVE, h, None))


class _PredictRelease(SplitNN):
    def predict(self, fed, trained, *, ids=None):
        if ids is None:
            _release_training_rows(fed, trained)
        return predict(fed, trained, ids=ids)


def test_only_the_shared_predicts_test_rows_count_as_test_rows():
    """R1 (r2): an id-less release tagged INFERENCE counted as test rows; only finetune.predict's marked ones do."""
    p, fed = build_federation(_config(sigma=4.0, epochs=1))
    dp = p.defenses[0]
    trained = p.method.finetune(fed, None)
    p.method.predict(fed, trained)
    assert dp.privacy_spent() is not None and dp.test_rows == {1: fed.parties[1].x_test.shape[0]}
    _release_training_rows(fed, trained)
    assert dp.privacy_spent() is None and "without sample ids" in dp.uncovered


def test_an_overridden_predict_is_an_unknown_feature_use():
    """R1 (r2b): a method overriding only predict() released the training rows there and kept its epsilon."""
    assert "predict()" in _PredictRelease(None).undeclared_feature_uses()[0]


def test_a_release_the_mechanism_did_not_count_withholds_the_test_row_claim_too():
    """Review rowcheck5 (s2): an undeclared own predict() sending raw test embeddings voided the training epsilon but
    the notes still claimed (2.17, 1e-05)-DP for each test row; an unmarked id-less release or an undeclared method
    now withholds the test-row claim as well."""
    p, fed = build_federation(_config(sigma=4.0, epochs=1))
    dp = p.defenses[0]
    trained = p.method.finetune(fed, None)
    p.method.predict(fed, trained)
    assert "DP for that test sample's features" in dp.notes()
    _release_training_rows(fed, trained)
    assert "no epsilon for the test rows either" in dp.notes() and "DP for that test" not in dp.notes()
    p, fed = build_federation(_config(sigma=4.0, epochs=1))
    dp = p.defenses[0]
    assert dp.covers(_PredictRelease(None))  # its own predict(): outside the mechanism
    p.method.predict(fed, p.method.finetune(fed, None))
    assert "no epsilon for the test rows either: its own code (_PredictRelease.predict())" in dp.notes()


class _CentredPretrain(VFLHLPActive):
    def pretrain(self, fed):
        return super().pretrain(fed)


class _OwnSkeleton(VFLHLPActive):
    def skeleton(self, fed):
        return super().skeleton(fed)


def test_a_pretraining_method_declaring_no_use_has_its_overrides_checked_too():
    """R2 (r8): vflhlp-a pretrains and declares no feature use; a subclass overriding only pretrain() (or skeleton())
    was skipped by the rule, and its bias centred on the victim's features kept the epsilon."""
    p, _ = build_federation(_config("vflhlp-a", sigma=4.0, epochs=1))
    dp = p.defenses[0]
    assert dp.covers(p.method) == ""
    for cls, name in ((_CentredPretrain, "pretrain()"), (_OwnSkeleton, "skeleton()")):
        assert name in dp.covers(cls(p.method.options))


class _OwnParameter(nn.Parameter):
    """A parameter class vflpriv never read (r5's computes F.linear plus the batch mean in __torch_function__)."""


class _OwnTensor(torch.Tensor):
    """A batch class vflpriv never read."""


def test_a_tensor_subclass_in_the_bottom_or_the_batch_gets_no_epsilon(monkeypatch):
    """R3 (r5): a Parameter subclass in vflpriv's own MLPEncoder mixed rows with no hook, and the probes swapped it
    for a plain Parameter: foreign_part '' and an epsilon. Now any parameter, buffer or batch not exactly
    nn.Parameter / torch.Tensor voids the claim."""
    rows = PrivateRows(nn.Linear(3, 2), clip=1.0, sigma=1.0, frozen=True, generator=torch.Generator())
    rows(torch.ones(4, 3))
    assert rows.misread == ""
    rows(torch.ones(4, 3).as_subclass(_OwnTensor))
    assert "_OwnTensor" in rows.misread

    def make(bottom):
        lin = next(m for m in bottom.modules() if type(m) is nn.Linear)
        lin.weight = _OwnParameter(lin.weight.detach().clone())
        return nn.Identity()
    _prepend(monkeypatch, make)
    p, fed = build_federation(_config(sigma=4.0, epochs=1))
    p.method.finetune(fed, None)
    assert p.defenses[0].privacy_spent() is None and "_OwnParameter" in p.defenses[0].uncovered


class _Tag(nn.Module):
    def forward(self, x):
        return x


class _Centre(nn.Module):
    def forward(self, x):
        return x - x.mean(0, keepdim=True)


def test_one_checked_bottom_vouches_for_no_other_partys(monkeypatch):
    """R4 (r7): party 1's foreign bottom was checked, party 2's centring one (frozen) never was; one defense-wide
    flag gave party 2's test rows a per-release epsilon."""
    made = []

    def make(bottom):
        made.append(bottom)
        return _Centre() if len(made) == 2 and bottom.requires_grad_(False) else _Tag()
    _prepend(monkeypatch, make)
    c = _config(sigma=4.0, epochs=1).model_dump(mode="json")
    c["partition"]["parties"] = 4
    p, fed = build_federation(RunConfig.model_validate(c))
    dp = p.defenses[0]
    trained = p.method.finetune(fed, None)
    p.method.predict(fed, trained)
    assert "_Centre" in dp.notes() and "each test row passed" not in dp.notes()
    assert [w.rows_checked for w in dp.wrapped] == [True, False, True] and not dp.rows_checked
    dp.wrapped[1].rows_checked = True  # as if checked: each party's test rows passed its mechanism once, not 3 times
    assert "each test row passed embedding-dp's mechanism 1 time(s) at inference, at parties 1, 2, 3 only" in dp.notes()


def test_the_test_row_note_names_the_guarded_party_and_a_label_record_says_why_it_has_no_feature_epsilon():
    """R6: a victim-2 record carried party 1's test-row epsilon unnamed; a label record's note said the feature
    defenses guard other parties' features."""
    c = _config(sigma=4.0, epochs=1).model_dump(mode="json")
    c["partition"]["parties"], c["defenses"][0]["party"] = 4, 1
    p, fed = build_federation(RunConfig.model_validate(c))
    p.method.predict(fed, p.method.finetune(fed, None))
    assert "at inference, at party 1 only" in p.defenses[0].notes()
    c = _config(sigma=4.0, epochs=1).model_dump(mode="json")
    c["attack"] = {"name": "mc"}
    (record,) = run([RunConfig.model_validate(c)])
    assert record.victim == "" and "a label attack: the feature epsilon does not apply" in record.notes
