"""Conformance of a method with the engine's contract, checked before an audit (``vflpriv audit --check-only``).

An audit is only as good as the channel: an attack sees what crossed it, a defense changes what crosses
it. A method is refused when

1. it sends a message it does not declare in ``sends`` (the channel raises on the first one);
2. it declares no adversary snapshot: pretraining must return a module for every party, and the
   trained model a bottom model for every party;
3. the passive parties' inputs reach the active party's predictions without passing the channel. The
   method is trained twice through a channel that replaces every payload with zeros, once with the
   passive parties' features rolled by half the rows (each sample gets another sample's passive
   features): a method that exchanges everything through the channel gives the active party
   bit-identical test logits both times (same seed, one thread), one with a side path does not.

The runs use the configuration as given, without the pretraining cache; non-federated methods (no
channel at all) pass by definition.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from vflpriv.config import TrainingConfig
from vflpriv.engine import Message
from vflpriv.errors import ConformanceError, ProtocolError
from vflpriv.planning import Plan, plan_training
from vflpriv.run import build_federation


class ZeroPayloads:
    """A channel transform that replaces every payload with zeros of its shape."""

    def protects(self, message: Message) -> bool:
        return True

    def __call__(self, payload, message: Message):
        if isinstance(payload, torch.Tensor):
            return torch.zeros_like(payload)
        return {k: torch.zeros_like(v) for k, v in payload.items()}


def _rolled_passive_features(p: Plan) -> Plan:
    ds = p.scenario.dataset

    def roll(xs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        return tuple(x if k == 0 else x.roll(x.shape[0] // 2, dims=0) for k, x in enumerate(xs))

    rolled = dataclasses.replace(ds, x_train=roll(ds.x_train), x_test=roll(ds.x_test))
    return dataclasses.replace(p, scenario=dataclasses.replace(p.scenario, dataset=rolled))


def _zeroed_run(p: Plan) -> torch.Tensor:
    """Train ``p`` through a zeroing channel (checking the snapshots on the way); the active party's test logits."""
    torch.manual_seed(0)  # a method drawing from the global RNG gets the same draws in both runs
    fed = build_federation(p, transforms=[ZeroPayloads()])
    method, name = p.method, p.config.method.name
    pretrained = method.pretrain(fed) if method.pretrains else None
    if method.pretrains and (not isinstance(pretrained, (list, tuple)) or len(pretrained) != len(fed.parties)
                             or not all(isinstance(m, nn.Module) for m in pretrained)):
        raise ProtocolError(f"method '{name}' declares pretraining but its pretrain() returned no encoder per party "
                            "(the adversary's pretraining snapshot)")
    trained = method.finetune(fed, pretrained)
    bottoms = getattr(trained, "bottoms", None)
    if not isinstance(bottoms, (list, tuple)) or len(bottoms) != len(fed.parties) \
            or not all(isinstance(m, nn.Module) for m in bottoms):
        raise ProtocolError(f"method '{name}' declares no adversary snapshot: its finetune() must return a Trained "
                            "with one bottom model per party")
    return method.predict(fed, trained).detach().nan_to_num()


def check_conformance(config: TrainingConfig) -> list[str]:
    """Run the checks on ``config``'s method; raise :class:`ConformanceError` naming the first violation.
    Returns the checks passed, for the report."""
    p = plan_training(config)
    if not p.method.federated:
        return ["not federated: no channel, nothing to check"]
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        real = _zeroed_run(p)
        rolled = _zeroed_run(_rolled_passive_features(p))
    except ProtocolError as exc:
        raise ConformanceError(f"refused: {exc}") from None
    finally:
        torch.set_num_threads(before)
    if real.shape != rolled.shape or not torch.equal(real, rolled):
        raise ConformanceError("refused: "
            f"method '{config.method.name}' lets the passive parties' features reach the active party's predictions "
            "without the channel: with every payload zeroed, changing those features changed the test logits"
        )
    return ["declared traffic only", "an adversary snapshot for each phase",
            "passive features reach the active party only through the channel"]
