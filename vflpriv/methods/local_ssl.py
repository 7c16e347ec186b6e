"""FedLocalSSL baselines (FedHSSL paper §V-A): each party pretrains alone on all its local samples.

``local-simsiam``, ``local-byol``, ``local-moco``: party k runs plain SSL (two augmented views, Table II)
on ``x_train[local_ids]`` (aligned and unaligned), exchanging nothing, then the parties finetune their
pretrained local encoders with the shared split-learning loop. The encoder has the architecture of the
FedSplitNN bottom model (REFERENCE §2), split into bottom + top only by naming.

``local_ssl_encoder`` is the same procedure for one set of features outside any federation: the
adversary's prior A_SimSiam (REFERENCE §9) pretrains its encoder with it.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from pydantic import Field
from torch import Tensor, nn

from vflpriv.common.seeding import generator as seeded_generator
from vflpriv.config.schema import ModelConfig
from vflpriv.data.base import PartySpec
from vflpriv.engine import PRETRAIN_PASSIVE_LOSS, DefensePoints, Federation, Party
from vflpriv.methods.base import SHARED_LOOP, Method
from vflpriv.methods.pretraining import (
    Flavour,
    LocalSSL,
    SSLOptions,
    build_tower,
    mean_loss,
)
from vflpriv.methods.towers import build_local_encoder
from vflpriv.models.training import set_cosine_lr


class LocalOptions(SSLOptions):
    """FedLocalSSL settings: ``epochs`` over the party's local samples plus the shared SSL options."""

    epochs: int = Field(
        4, ge=1,
        description="local SSL epochs; default matches FedHSSL's default global iterations x local epochs "
        "(paper: 40 global iterations)",
    )

    def ssl_epochs(self) -> int:
        return self.epochs


def _train_local(
    spec: PartySpec,
    x: Tensor,
    ids: Tensor,
    *,
    flavour: Flavour,
    model_config: ModelConfig,
    options: LocalOptions,
    seed: int,
    stream: str,
    device: torch.device,
    party: int = -1,
    hooks: DefensePoints | None = None,
) -> tuple[nn.Module, list[Tensor]]:
    """Pretrain one party's encoder on ``x[ids]``; returns it and the mean loss of each epoch. ``party`` and ``hooks``:
    the defense points of the party in a federation (none alone)."""
    init = seeded_generator(seed, f"{stream}:init")
    encoder = build_local_encoder(spec, model_config, generator=init)
    tower = build_tower(encoder, flavour, options, generator=init).to(device)
    state = LocalSSL.create(flavour, options, tower, x[ids], spec, seed=seed, stream=stream, device=device,
                            party=party, hooks=hooks)
    history = []
    for epoch in range(options.epochs):
        set_cosine_lr(state.optimizer, epoch, options.epochs)
        history.append(mean_loss(state.epoch(x, ids)))
    return tower.encoder, history


class LocalSSLMethod(Method):
    """FedLocal{SimSiam,BYOL,MoCo}: no messages in pretraining; finetunes the local encoders f_l."""

    Options: ClassVar[type[LocalOptions]] = LocalOptions
    pretrains: ClassVar[bool] = True
    flavour: ClassVar[Flavour] = "simsiam"
    #: The shared finetuning loop, and a passive party's defenses in its local SSL (``passive_loss``, pretrain).
    supports: ClassVar[frozenset[str]] = SHARED_LOOP | {PRETRAIN_PASSIVE_LOSS}

    def __init__(self, options: LocalOptions):
        super().__init__(options)
        self.history: list[dict[str, list[float]]] = []

    def feature_uses(self) -> tuple[str, ...]:
        """Declared beside its ``pretrain`` and ``skeleton`` (read): their only use is the pretraining the default
        names."""
        return super().feature_uses()

    def label_uses(self) -> tuple[str, ...]:
        """Declared beside its ``pretrain``, ``skeleton`` and their helpers (read): self-supervised, they read no
        label, so its uses are the default's."""
        return super().label_uses()

    def skeleton(self, fed: Federation) -> list[nn.Module]:
        """Untrained modules of the architecture ``pretrain`` returns (to load cached weights into)."""
        g = torch.Generator().manual_seed(0)
        return [build_local_encoder(p.spec, fed.model, generator=g).to(fed.device) for p in fed.parties]

    def pretrain(self, fed: Federation) -> list[nn.Module]:
        seed = fed.generator.initial_seed()
        encoders, per_party = [], []
        for p in fed.parties:
            encoder, history = _train_local(
                p.spec, p.x_train, p.local_ids, flavour=self.flavour, model_config=fed.model,
                options=self.options, seed=seed, stream=_stream(p.index), device=fed.device, party=p.index,
                hooks=fed.hooks,
            )
            encoders.append(encoder)
            per_party.append(torch.stack(history))
        losses = torch.stack(per_party, dim=1).tolist()  # [epoch][party], one sync at the end
        self.history = [{"local": row} for row in losses]
        return encoders


    def pretrain_alone(self, spec: PartySpec, x: Tensor, *, party: int, seed: int, model: ModelConfig,
                       device: torch.device) -> nn.Module:
        """Pretraining exchanges nothing, so a party alone gets exactly the encoder ``pretrain`` gives it: the same
        flavour, options and stream (``seed``: the run's ``method`` stream, as ``fed.generator``)."""
        x = x.to(device)
        encoder, _ = _train_local(spec, x, torch.arange(x.shape[0], device=device), flavour=self.flavour,
                                  model_config=model, options=self.options, seed=seed, stream=_stream(party),
                                  device=device)
        return encoder.eval()


def _stream(party: int) -> str:
    return f"pretrain:local:{party}"


class LocalSimSiam(LocalSSLMethod):
    """FedLocalSimSiam."""

    flavour = "simsiam"


class LocalBYOL(LocalSSLMethod):
    """FedLocalBYOL (EMA target, momentum 0.995 by default)."""

    flavour = "byol"


class LocalMoCo(LocalSSLMethod):
    """FedLocalMoCo (EMA key encoder 0.99, InfoNCE tau 0.5, queue 4096)."""

    flavour = "moco"


def local_ssl_encoder(
    party: Party | PartySpec,
    x: Tensor | None = None,
    *,
    model_config: ModelConfig,
    options: LocalOptions | dict | None = None,
    generator: torch.Generator,
    device: torch.device | str | None = None,
    flavour: Flavour = "simsiam",
) -> nn.Module:
    """One encoder pretrained with plain SSL (SimSiam by default) on ``x``, no federation, no channel.

    ``party`` is a :class:`Party` (``x`` defaults to its local samples) or a :class:`PartySpec` with the
    features ``x`` (e.g. the adversary's ``AdversaryView.local_x``). ``generator`` seeds everything (one
    draw). Returns the encoder (``out_dim`` set, architecture of ``build_encoder``) in eval mode.
    """
    if isinstance(party, Party):
        spec = party.spec
        if x is None:
            x = party.x_train[party.local_ids]
    else:
        spec = party
    if x is None:
        raise ValueError("local_ssl_encoder needs the features x when given a PartySpec")
    opts = options if isinstance(options, LocalOptions) else LocalOptions.model_validate(options or {})
    dev = torch.device(device) if device is not None else x.device
    x = x.to(dev)
    seed = int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device))
    encoder, _ = _train_local(
        spec, x, torch.arange(x.shape[0], device=dev), flavour=flavour, model_config=model_config,
        options=opts, seed=seed, stream="local-ssl", device=dev,
    )
    return encoder.eval()
