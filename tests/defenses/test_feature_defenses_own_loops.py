"""The feature defenses in the methods whose finetuning is a loop of their own: one-shot and few-shot VFL (each passive
party's local semi-supervised training calls ``passive_bottom`` and ``passive_loss``) and SS-VFL-I (its one release
passes ``passive_bottom``; no passive party trains there). Strength 0 is the identity bit for bit; a strength changes
what the adversary receives (and, on one-shot, the passive extractor); embedding-dp's claim there is no training epsilon,
with the reason, and its per-release note for the test samples."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

from vflpriv.config.schema import RunConfig
from vflpriv.defenses.embedding_dp import PrivateRows
from vflpriv.engine import EMBEDDING, PASSIVE_BOTTOM
from vflpriv.runner.execution import run

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "methods"))
from pretrain_helpers import TINY_MODEL, build_federation, tiny_options  # noqa: E402

FEATURE_DEFENSES = ["nopeek", "mid-sender", "fi-adversarial", "embedding-dp"]
CASES = [(m, d) for m in ("oneshot", "fewshot") for d in FEATURE_DEFENSES] + [("ssvfl-i", "embedding-dp")]


def _config(method: str, defenses=(), **options) -> RunConfig:
    return RunConfig.model_validate({
        "partition": {"labeled": 100, "aux": 40}, "model": TINY_MODEL,
        "finetune": {"epochs": 2, "batch_size": 32},
        "method": {"name": method, "options": tiny_options(method, **options)}, "defenses": list(defenses),
        "attack": {"name": "fi-decoder", "options": {"epochs": 3}}})


def _defended(name: str, strength: float) -> list[dict]:
    return [{"name": name, "strength": strength, "sweep": True}]


def _numbers(record) -> tuple:
    assert record.status == "ok", record.error
    return record.utility, record.feature_mse, record.attack_errors, record.prior_errors, record.traffic


def _trained(config: RunConfig) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
    """Every passive embedding payload the channel delivered while ``config``'s method trained, and party 1's bottom
    as it trained it (inside its defense's wrapper)."""
    p, fed = build_federation(config)
    delivered: list[torch.Tensor] = []

    def keep(message, payload):
        if message.kind == EMBEDDING and message.sender != 0:
            delivered.extend(payload.values() if isinstance(payload, dict) else [payload])

    fed.channel.observers.append(keep)
    trained = p.method.finetune(fed, p.method.pretrain(fed))
    inner = trained.bottoms[1]
    inner = getattr(inner, "bottom", inner)
    return [d.detach().clone() for d in delivered], {k: v.detach().clone() for k, v in inner.state_dict().items()}


def _equal(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize(("method", "name"), CASES, ids=[f"{m}-{d}" for m, d in CASES])
def test_strength_zero_is_the_identity_bit_for_bit_and_a_strength_changes_what_the_adversary_receives(method, name):
    (plain,) = run(_config(method))
    (zero,) = run(_config(method, _defended(name, 0.0)))
    assert _numbers(zero) == _numbers(plain)
    sent, bottom = _trained(_config(method))
    sent_zero, bottom_zero = _trained(_config(method, _defended(name, 0.0)))
    assert _equal(sent_zero, sent) and _equal(list(bottom_zero.values()), list(bottom.values()))
    sent_acting, bottom_acting = _trained(_config(method, _defended(name, 1.0)))
    assert len(sent_acting) == len(sent)
    assert not torch.equal(sent_acting[-1], sent[-1])  # what the server trains on (nopeek leaves the fresh upload (1))
    if method != "ssvfl-i":  # the local SSL trains the extractor under the defense: its own parameters move
        assert not _equal(list(bottom_acting.values()), list(bottom.values()))


def test_the_loss_defenses_add_their_term_to_one_shot_s_local_ssl_from_its_inputs_and_extractor_outputs(monkeypatch):
    from vflpriv.defenses.nopeek import NoPeek

    seen = []
    original = NoPeek.passive_loss

    def spy(self, party, phase, x, sent):
        seen.append((party, phase, x.shape[0], sent.shape, sent.requires_grad))
        return original(self, party, phase, x, sent)

    monkeypatch.setattr(NoPeek, "passive_loss", spy)
    _trained(_config("oneshot", _defended("nopeek", 1.0)))
    assert seen and {s[0] for s in seen} == {1} and {s[1] for s in seen} == {"finetune"}
    assert all(rows == shape[0] and shape[1] == TINY_MODEL["out_dim"] and grad for _, _, rows, shape, grad in seen)


def test_embedding_dp_on_ssvfl_i_clips_and_noises_the_one_release_and_records_no_training_epsilon_with_the_reason():
    p, fed = build_federation(_config("ssvfl-i", _defended("embedding-dp", 1.0)))
    (defense,) = p.defenses
    assert defense.called == {PASSIVE_BOTTOM} and not defense.passive_backpropagates(1)  # nothing trains: no DP-SGD
    (record,) = run(_config("ssvfl-i", _defended("embedding-dp", 1.0)))
    assert record.status == "ok", record.error
    assert math.isnan(record.epsilon_features)
    assert "no epsilon recorded: its pretraining trains each party's encoder on the party's features" in record.notes
    assert "each test row passed embedding-dp's mechanism 1 time(s) at inference" in record.notes


def test_embedding_dp_s_release_on_ssvfl_i_is_the_clipped_row_plus_sigma_c_noise():
    sigma, clip = 0.5, 0.3
    config = _config("ssvfl-i", [{"name": "embedding-dp", "strength": sigma, "sweep": True,
                                  "options": {"clip": clip}}])
    p, fed = build_federation(config)
    pretrained = p.method.pretrain(fed)
    sent = []
    fed.channel.observers.append(lambda m, payload: sent.append(payload) if m.kind == EMBEDDING else None)
    trained = p.method.finetune(fed, pretrained)
    wrapped = trained.bottoms[1]
    assert isinstance(wrapped, PrivateRows) and not wrapped.frozen and not wrapped.training
    with torch.no_grad():
        rows = wrapped.bottom(fed.parties[1].x_train[fed.labeled_aligned()])
    clipped = rows * (clip / rows.norm(dim=1, keepdim=True)).clamp(max=1.0)
    noise = (sent[0] - clipped) / (sigma * clip)
    assert noise.numel() > 1000 and abs(noise.mean().item()) < 0.1 and abs(noise.std().item() - 1.0) < 0.05


def test_one_shot_s_end_to_end_finetuning_keeps_the_bottom_its_protocol_wrapped_once():
    config = _config("oneshot", _defended("embedding-dp", 1.0), finetune_end_to_end=True)
    p, fed = build_federation(config)
    trained = p.method.finetune(fed, None)
    assert isinstance(trained.bottoms[1], PrivateRows) and not isinstance(trained.bottoms[1].bottom, PrivateRows)


def test_one_shot_s_observe_point_holds_the_rows_the_passive_party_really_sent_through_its_defense():
    p, fed = build_federation(_config("oneshot", _defended("embedding-dp", 1.0)))
    delivered, observed = [], []
    fed.channel.observers.append(lambda m, payload: delivered.append(payload) if m.kind == EMBEDDING else None)
    fed.hooks.passive_step = observed.append
    p.method.finetune(fed, None)
    (step,) = observed
    assert torch.equal(step.embedding, delivered[0])  # the noisy upload (1), not a fresh draw of the mechanism


def test_fixmatch_with_a_term_that_adds_nothing_is_the_plain_loss_bit_for_bit():
    from torch import nn

    from vflpriv.methods.oneshot import LocalModel
    from vflpriv.models.ssl.fixmatch import TabularViews, fixmatch_loss

    class Extractor(nn.Sequential):
        out_dim = 8

    torch.manual_seed(0)
    model = LocalModel(Extractor(nn.Linear(5, 8), nn.BatchNorm1d(8), nn.ReLU()), 3)
    x, u, y = torch.randn(6, 5), torch.randn(6, 5), torch.randint(0, 3, (6,))
    views = TabularViews(torch.zeros(1, 5), 0)
    losses = []
    for term in (None, lambda inputs, h: None):
        loss = fixmatch_loss(model, x, y, u, views, threshold=0.0, lambda_u=1.0, generator=torch.Generator().manual_seed(1),
                             term=term)
        grads = torch.autograd.grad(loss, list(model.parameters()))
        losses.append((loss, grads))
    (plain, g0), (termed, g1) = losses
    assert torch.equal(plain, termed) and all(torch.equal(a, b) for a, b in zip(g0, g1))


@pytest.mark.parametrize(("method", "paired"), [("oneshot", set(FEATURE_DEFENSES)), ("fewshot", set(FEATURE_DEFENSES)),
                                                ("ssvfl-i", {"embedding-dp"})])
def test_the_audit_pairs_the_feature_defenses_that_act_there_with_the_feature_attack_and_says_why_not_the_others(
        method, paired):
    from vflpriv.workflows.audit import AuditConfig, audit_grid

    cfg = AuditConfig.model_validate({
        "model": TINY_MODEL, "partition": {"labeled": 100, "aux": 40}, "seeds": [0],
        "method": {"name": method, "options": tiny_options(method)},
        "audit": {"attacks": ["fi-decoder"], "canaries": 0, "phases": ["finetune"], "defenses": [{"name": d} for d in FEATURE_DEFENSES]}})
    runs, skipped = audit_grid(cfg)
    assert {r.swept.name for r in runs if r.defenses and r.attack.adversary == 0} == paired
    reasons = {s.defense: s.reason for s in skipped}
    for name in set(FEATURE_DEFENSES) - paired:
        assert "has no passive training in finetuning" in reasons[name], reasons


def test_embedding_dp_claims_no_training_epsilon_where_the_loop_calls_no_dp_sgd_point_even_if_no_feature_use_is_declared():
    """A plugin built on one-shot VFL that declares no feature use (its FixMatch training goes through the passive loss
    point, which the guide says need not be declared): its bottom trains without DP-SGD, so no training epsilon (the
    review measured 16.51 printed)."""
    from vflpriv.config.registry import METHODS

    class Undeclared(METHODS.get("oneshot")):
        def feature_uses(self):
            return ()

    METHODS.register("oneshot-undeclared", Undeclared)
    try:
        p, _ = build_federation(_config("oneshot-undeclared", _defended("embedding-dp", 1.0)))
        (defense,) = p.defenses
        assert "calls no passive-backward point" in defense.uncovered
    finally:
        METHODS._extra.pop("oneshot-undeclared")
