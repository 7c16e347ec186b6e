"""The victim's hook points, where issue 47's feature defenses act: what a passive party sends (before the channel,
so the active party's inbox and every feature attack see it) and its own loss, with the parameters a defense adds
trained by that party's optimiser; at the identity strength nothing moves."""

from __future__ import annotations

import torch
from torch import nn

from vflpriv.config.registry import DEFENSES
from vflpriv.defenses.base import PASSIVE_EMBEDDING, PASSIVE_LOSS, StrengthAxis, VictimDefense
from vflpriv.engine import ACTIVE, EMBEDDING, FINETUNE, INFERENCE
from vflpriv.runner.execution import build_federation, train
from vflpriv.runner.planning import plan


class _Scale(VictimDefense):
    """Sends strength x a learnt scalar x the embedding, and adds strength x ||h||^2 to the victim's loss."""

    hook_points = frozenset({PASSIVE_EMBEDDING, PASSIVE_LOSS})
    axis = StrengthAxis(name="lambda", stronger="higher", identity=0.0)

    def bind(self, federation):
        self.scale = nn.Parameter(torch.ones(()))

    def send_embedding(self, party, x, embedding):
        return embedding if party != self.party or self.is_identity else embedding * self.scale * self.strength

    def passive_loss_terms(self, party, x, embedding):
        return None if party != self.party or self.is_identity else self.strength * embedding.pow(2).mean()

    def passive_parameters(self, party):
        return [self.scale] if party == self.party and not self.is_identity else []


def _trained(tiny, strength):
    DEFENSES.register("test-scale", _Scale)
    cfg = tiny(attack={"name": "fi-decoder"}, defenses=[{"name": "test-scale", "strength": strength}])
    p = plan(cfg)
    return p, train(p)


def test_the_victim_s_points_act_before_the_channel_and_train_its_own_parameters(tiny):
    p, result = _trained(tiny, 0.5)
    defense = p.defenses[0]
    assert defense.party == 1
    inbox = result.fed.channel.inboxes[ACTIVE]
    sent = torch.cat([r.payload for r in inbox.select(EMBEDDING, FINETUNE)])
    assert float(defense.scale.detach()) != 1.0  # adopted into the passive party's optimiser and trained
    bottom = result.trained.bottoms[1]
    x = result.fed.parties[1].x_test
    with torch.no_grad():
        expected = bottom.eval()(x) * defense.scale * 0.5
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
    with pytest.raises(ConfigError, match="protects a passive party's features"):
        build_federation(plan(tiny(attack={"name": "fi-decoder"},
                                   defenses=[{"name": "test-scale", "strength": 0.5, "party": 0}])))


class _Shrink(VictimDefense):
    """Only a term of the victim's loss: strength x the mean squared embedding."""

    hook_points = frozenset({PASSIVE_LOSS})
    axis = StrengthAxis(name="lambda", stronger="higher", identity=0.0)

    def passive_loss_terms(self, party, x, embedding):
        return None if party != self.party else self.strength * embedding.pow(2).mean()


def test_a_term_of_the_victim_s_loss_trains_its_bottom(tiny):
    DEFENSES.register("test-shrink", _Shrink)
    norms = []
    for defenses in ([], [{"name": "test-shrink", "strength": 1000.0}]):
        result = train(plan(tiny(attack={"name": "fi-decoder"}, finetune={"epochs": 20, "batch_size": 32},
                                 defenses=defenses)))
        sent = [r.payload for r in result.fed.channel.inboxes[ACTIVE].select(EMBEDDING, INFERENCE)]
        norms.append(float(torch.cat(sent).pow(2).mean()))
    assert norms[1] < 0.5 * norms[0]
