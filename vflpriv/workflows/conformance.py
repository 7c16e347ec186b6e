"""Conformance of a method with the engine's contract, checked before an audit (``vflpriv audit --check-only``).

An audit is only as good as the channel: an attack sees what crossed it, a defense changes what crosses
it. A method is refused when

1. it sends a message it does not declare in ``sends`` (the channel raises on the first one);
2. it declares no adversary snapshot: pretraining must return a module for every party, and the
   trained model a bottom model for every party;
3. its passive parties' finetuning embeddings are not as wide as it declares (``Method.embedding``: attacks such
   as DLI are judged by that declaration);
4. one party's data reaches another party's model without passing the channel, in either direction.
   The method is trained through a channel that replaces every payload with zeros, so nothing that
   crossed the channel carries information, three times: on the real data, with the passive parties'
   features rolled by half the rows, and with the active party's features rolled and its labels shifted
   (y -> y + 1 mod C). A method that lets parties learn from each other only through what ``send``
   returned gives the active party bit-identical test logits in the first two runs (same seed, one
   thread) and every passive party bit-identical models (its pretraining and finetuning snapshots) in the
   first and third. Passive -> active catches an active party reading passive features; active ->
   passive catches a passive party training on the gradient the active party computed instead of the
   payload it received (every gradient defense would then be silently off).
   Every party may be an adversary (the active party and the server attack a passive party's features), so the
   active party's own models (its pretrained encoder, its finetuned bottom and top) must be bit-identical in the
   first two runs too, and with K > 2 parties each passive party's features are changed alone and every other
   party's snapshots must stay bit-identical (passive -> passive). The server holds nothing but what it receives
   (a method computes its aggregation from the channel's payloads), so its view is its inbox.

The runs use the configuration as given, without the pretraining cache; non-federated methods (no
channel at all) pass by definition. The check assumes, as every built-in method does, that how many
messages a method sends does not depend on the values of the data.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass

import torch
from torch import nn

from vflpriv.common.errors import ChannelViolation, ConformanceError, ProtocolError
from vflpriv.config.schema import TrainingConfig
from vflpriv.engine import EMBEDDING, PRETRAIN, Message
from vflpriv.runner.execution import build_federation, method_named
from vflpriv.runner.planning import Plan, plan_training


class ZeroPayloads:
    """A channel transform that replaces every payload with zeros of its shape."""

    def protects(self, message: Message) -> bool:
        return True

    def __call__(self, payload, message: Message):
        if isinstance(payload, torch.Tensor):
            return torch.zeros_like(payload)
        return {k: torch.zeros_like(v) for k, v in payload.items()}


@dataclass
class ZeroedRun:
    """What a training through the zeroing channel produced: the active party's test logits, each passive
    party's snapshots (its pretrained encoder, if the method pretrains, and its finetuned bottom), and the active
    party's own models (the same, and its top)."""

    logits: torch.Tensor
    passive: dict[int, dict[str, nn.Module]]
    active: dict[str, nn.Module]
    #: The widths of the embeddings the passive parties sent in finetuning and inference (the method's declaration).
    widths: set[int]


def _with_dataset(p: Plan, **changes) -> Plan:
    ds = dataclasses.replace(p.scenario.dataset, **changes)
    return dataclasses.replace(p, scenario=dataclasses.replace(p.scenario, dataset=ds))


def _roll(xs: tuple[torch.Tensor, ...], parties: set[int]) -> tuple[torch.Tensor, ...]:
    return tuple(x.roll(x.shape[0] // 2, dims=0) if k in parties else x for k, x in enumerate(xs))


def _rolled_passive_features(p: Plan, parties: set[int] | None = None) -> Plan:
    """Each sample gets another sample's features at the passive ``parties`` (default every passive party); the
    other parties' data is unchanged."""
    ds = p.scenario.dataset
    passive = set(range(1, ds.parties)) if parties is None else parties
    return _with_dataset(p, x_train=_roll(ds.x_train, passive), x_test=_roll(ds.x_test, passive))


def _altered_active_data(p: Plan) -> Plan:
    """The active party's features rolled and every label shifted to the next class; passive data unchanged."""
    ds = p.scenario.dataset
    return _with_dataset(p, x_train=_roll(ds.x_train, {0}), x_test=_roll(ds.x_test, {0}),
                         y_train=(ds.y_train + 1) % ds.num_classes, y_test=(ds.y_test + 1) % ds.num_classes)


def _zeroed_run(p: Plan) -> ZeroedRun:
    """Train ``p`` through a zeroing channel, checking the snapshots on the way."""
    torch.manual_seed(0)  # a method drawing from the global RNG gets the same draws in every run
    fed = build_federation(p, transforms=[ZeroPayloads()])
    method, name = p.method, p.config.method.name
    widths: set[int] = set()

    def measure(message: Message, payload) -> None:
        if message.kind == EMBEDDING and message.phase != PRETRAIN and message.sender != 0 \
                and isinstance(payload, torch.Tensor):
            widths.add(int(payload.shape[-1]))

    fed.channel.observers.append(measure)
    pretrained = method.pretrain(fed) if method.pretrains else None
    if method.pretrains and (not isinstance(pretrained, (list, tuple)) or len(pretrained) != len(fed.parties)
                             or not all(isinstance(m, nn.Module) for m in pretrained)):
        raise ProtocolError(f"method '{name}' declares pretraining but its pretrain() returned no encoder per party "
                            "(the adversary's pretraining snapshot)")
    # a copy: finetuning may go on training the pretrained modules in place
    snapshots = {k: {"pretraining": copy.deepcopy(pretrained[k])} if pretrained else {} for k in range(len(fed.parties))}
    trained = method.finetune(fed, pretrained)
    bottoms = getattr(trained, "bottoms", None)
    if not isinstance(bottoms, (list, tuple)) or len(bottoms) != len(fed.parties) \
            or not all(isinstance(m, nn.Module) for m in bottoms):
        raise ProtocolError(f"method '{name}' declares no adversary snapshot: its finetune() must return a Trained "
                            "with one bottom model per party")
    for k in snapshots:
        snapshots[k]["finetuning"] = bottoms[k]
    active = snapshots.pop(0)
    if isinstance(getattr(trained, "top", None), nn.Module):
        active["top"] = trained.top
    logits = method.predict(fed, trained).detach().nan_to_num()
    return ZeroedRun(logits, snapshots, active, widths)


def _same_module(a: nn.Module, b: nn.Module) -> bool:
    """Bit-identical parameters and buffers (NaNs in the same places count as equal)."""
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(
        sa[k].shape == sb[k].shape and torch.equal(sa[k].nan_to_num(), sb[k].nan_to_num()) for k in sa)


def _passive_changed(real: ZeroedRun, altered: ZeroedRun, *, but: int | None = None) -> tuple[int, str] | None:
    """The first (passive party, snapshot) that differs between the runs (party ``but`` left out), or None."""
    for k, snapshots in real.passive.items():
        for phase, module in snapshots.items():
            if k != but and not _same_module(module, altered.passive[k][phase]):
                return k, phase
    return None


def _active_changed(real: ZeroedRun, altered: ZeroedRun) -> str | None:
    """The first of the active party's own models that differs between the runs, or None."""
    return next((name for name, module in real.active.items() if not _same_module(module, altered.active[name])), None)


def check_conformance(config: TrainingConfig) -> list[str]:
    """Run the checks on ``config``'s method; raise :class:`ConformanceError` naming the first violation.
    Returns the checks passed, for the report."""
    p = plan_training(config)
    if not p.method.federated:
        return ["not federated: no channel, nothing to check"]
    name = config.method.name
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        real = _zeroed_run(p)
        rolled = _zeroed_run(_rolled_passive_features(p))
        altered = _zeroed_run(_altered_active_data(p))
        alone = {j: _zeroed_run(_rolled_passive_features(p, {j})) for j in range(1, p.scenario.parties)
                 if p.scenario.parties > 2}
    except ProtocolError as exc:  # the channel names the message, the method is named here; others name their author
        who = f"{method_named(p)}: " if isinstance(exc, ChannelViolation) else ""
        raise ConformanceError(f"refused: {who}{exc}") from None
    finally:
        torch.set_num_threads(before)
    if real.logits.shape != rolled.logits.shape or not torch.equal(real.logits, rolled.logits):
        raise ConformanceError("refused: "
            f"method '{name}' lets the passive parties' features reach the active party's predictions "
            "without the channel: with every payload zeroed, changing those features changed the test logits"
        )
    model = _active_changed(real, rolled)
    if model is not None:
        raise ConformanceError("refused: "
            f"method '{name}' lets the passive parties' features reach the active party's {model} model without the "
            "channel: with every payload zeroed, changing those features changed it (an active adversary would see "
            "more than it received)")
    for j, run in alone.items():
        other = _passive_changed(real, run, but=j)
        if other is not None:
            raise ConformanceError("refused: "
                f"method '{name}' lets passive party {j}'s features reach passive party {other[0]}'s model without the "
                f"channel: with every payload zeroed, changing them changed party {other[0]}'s {other[1]} snapshot")
    declared = p.method.declared(p.config, num_classes=p.scenario.dataset.num_classes).model.out_dim
    if real.widths - {declared}:
        raise ConformanceError("refused: "
            f"method '{name}' sends passive embeddings of {', '.join(map(str, sorted(real.widths)))} units, but declares "
            f"{declared} (embedding = '{p.method.embedding}'): attacks are judged by the declaration; declare "
            "embedding = 'classes' for class logits, or 'out_dim' for model.out_dim units")
    changed = _passive_changed(real, altered)
    if changed is not None:
        party, phase = changed
        raise ConformanceError("refused: "
            f"method '{name}' lets the active party's data reach passive party {party}'s model without the channel: "
            f"with every payload zeroed, changing the active party's features and labels changed party {party}'s "
            f"{phase} snapshot (does it train on a tensor the active party computed instead of the payload "
            "fed.channel.send returned?)"
        )
    return ["declared traffic only, each message to the role it goes to", "an adversary snapshot for each phase",
            f"passive embeddings of the declared width ({declared} units)",
            "passive features reach the active party (its predictions and its own models) only through the channel",
            "the active party's features and labels reach the passive parties only through the channel",
            *(["each passive party's features reach the other passive parties only through the channel"]
              if alone else [])]
