"""The victim's hook points, where issue 47's feature defenses act: what a passive party sends (before the channel,
so the active party's inbox and every feature attack see it) and its own loss, with the parameters a defense adds
trained by that party's optimiser; at the identity strength nothing moves."""

from __future__ import annotations

import torch
from torch import nn

from vflpriv.config.registry import DEFENSES
from vflpriv.defenses.base import StrengthAxis
from vflpriv.defenses.passive import PASSIVE_BOTTOM, PASSIVE_LOSS, PassiveDefense
from vflpriv.engine import ACTIVE, EMBEDDING, FINETUNE, INFERENCE
from vflpriv.runner.execution import build_federation, train
from vflpriv.runner.planning import plan


class _Scaled(nn.Module):
    """A bottom whose output is multiplied by a learnt scalar and a constant."""

    def __init__(self, bottom: nn.Module, factor: float):
        super().__init__()
        self.bottom, self.factor, self.scale = bottom, factor, nn.Parameter(torch.ones(()))
        self.out_dim = bottom.out_dim

    def forward(self, x):
        return self.bottom(x) * self.scale * self.factor


class _Scale(PassiveDefense):
    """Sends strength x a learnt scalar x the embedding, and adds strength x ||h||^2 to the victim's loss."""

    hook_points = frozenset({PASSIVE_BOTTOM, PASSIVE_LOSS})
    axis = StrengthAxis(name="lambda", stronger="higher", identity=0.0)

    def passive_bottom(self, party, bottom):
        if not self.acts_for(party, FINETUNE):
            return bottom
        self.wrapped = _Scaled(bottom, self.strength)
        return self.wrapped

    def passive_loss(self, party, phase, x, sent):
        return self.strength * sent.pow(2).mean() if self.acts_for(party, phase) else None


def _trained(tiny, strength):
    DEFENSES.register("test-scale", _Scale)
    cfg = tiny(attack={"name": "fi-decoder"}, defenses=[{"name": "test-scale", "strength": strength}])
    p = plan(cfg)
    return p, train(p)


def test_the_victim_s_points_act_before_the_channel_and_train_its_own_parameters(tiny):
    p, result = _trained(tiny, 0.5)
    defense = p.defenses[0]
    assert defense.party == "passive"  # unset: every passive party
    inbox = result.fed.channel.inboxes[ACTIVE]
    sent = torch.cat([r.payload for r in inbox.select(EMBEDDING, FINETUNE)])
    assert float(defense.wrapped.scale.detach()) != 1.0  # in the passive party's optimiser, and trained
    bottom = result.trained.bottoms[1]
    assert bottom is defense.wrapped  # what the victim holds after training
    x = result.fed.parties[1].x_test
    with torch.no_grad():
        expected = bottom.bottom.eval()(x) * defense.wrapped.scale * 0.5
    got = torch.cat([r.payload for r in inbox.select(EMBEDDING, INFERENCE) if r.sample_ids is None])
    assert torch.allclose(got, expected, atol=1e-5)  # at inference too
    assert sent.abs().mean() < 1.0


def test_at_the_identity_strength_the_training_is_the_undefended_one(tiny):
    _, defended = _trained(tiny, 0.0)
    cfg = tiny(attack={"name": "fi-decoder"})
    plain = train(plan(cfg))
    assert defended.utility == plain.utility
    for a, b in zip(defended.trained.bottoms[1].state_dict().values(), plain.trained.bottoms[1].state_dict().values()):
        assert torch.equal(a, b)


def test_a_victim_defense_on_the_active_party_is_refused(tiny):
    import pytest

    from vflpriv.common.errors import ConfigError

    DEFENSES.register("test-scale", _Scale)
    with pytest.raises(ConfigError, match="protects a passive party's features: party must be 1"):
        build_federation(plan(tiny(attack={"name": "fi-decoder"},
                                   defenses=[{"name": "test-scale", "strength": 0.5, "party": 0}])))


class _Shrink(PassiveDefense):
    """Only a term of the victim's loss: strength x the mean squared embedding."""

    hook_points = frozenset({PASSIVE_LOSS})
    axis = StrengthAxis(name="lambda", stronger="higher", identity=0.0)

    def passive_loss(self, party, phase, x, sent):
        return self.strength * sent.pow(2).mean() if self.acts_for(party, phase) else None


def test_a_term_of_the_victim_s_loss_trains_its_bottom(tiny):
    DEFENSES.register("test-shrink", _Shrink)
    norms = []
    for defenses in ([], [{"name": "test-shrink", "strength": 1000.0}]):
        result = train(plan(tiny(attack={"name": "fi-decoder"}, finetune={"epochs": 20, "batch_size": 32},
                                 defenses=defenses)))
        sent = [r.payload for r in result.fed.channel.inboxes[ACTIVE].select(EMBEDDING, INFERENCE)]
        norms.append(float(torch.cat(sent).pow(2).mean()))
    assert norms[1] < 0.5 * norms[0]
