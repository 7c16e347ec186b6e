"""FedHSSL and its sub-procedures (FedHSSL paper Algorithm 1, Eq. 5-6; REFERENCE.md §4).

Each global iteration:

1. **Cross-party SSL** on the aligned samples (all methods here). Every party k computes
   z_c^k = g_c(f_c(x^k)); the active party sends z_c^1 to each passive party and each passive party sends
   its z_c^j to the active party, through the channel (kind ``embedding``, phase ``pretrain``; star
   topology; the received tensors carry no graph, so no gradient crosses). Eq. 5: the active party
   minimises the mean over j of L(p_c^1, z_c^j), passive j minimises L(p_c^j, z_c^1). With
   ``local_updates`` = e > 1 each party makes e updates per exchanged z (FedBCD-style, paper Fig. 7),
   recomputing its own prediction but keeping the received z. As in the code: BYOL's cross step has no
   EMA target, MoCo's uses NT-Xent over [own batch; received batch] (tau 0.5; REFERENCE §4).
2. **Cross-party-guided local SSL** on all local samples (FedGSSL, FedHSSL): Eq. 6 with gamma
   (``LocalSSL.epoch``); no messages.
3. **Partial model aggregation** (FedHSSL): every party sends its local top encoder, local projector and
   local predictor (MoCo: top + projector) to the server (``SERVER``): the top encoder's parameters as kind
   ``weights``, the heads' as kind ``head-weights``, BatchNorm running statistics as kind ``statistics``;
   the server averages each with equal weights and sends the average back to each party, all through the
   channel (``pma_statistics`` false keeps the statistics local, FedBN-style). Bottom encoders and the cross
   branch stay private.

The guidance target of step 2 comes from the cross branch in train mode, as the code's ``set_train`` leaves it
(``guidance_mode``; ``../shared/FEDHSSL-CODE.md`` compares each step with the authors' code).

Finetuning starts from f_c (FedCSSL) or from 0.5 f_c + 0.5 f_l (FedGSSL, FedHSSL; ``pooling``).
"""

from __future__ import annotations

from functools import partial
from typing import ClassVar, Literal

import torch
from pydantic import Field
from torch import Tensor, nn

from vflpriv.common.seeding import generator as seeded_generator
from vflpriv.engine import (
    ACTIVE,
    EMBEDDING,
    HEAD_WEIGHTS,
    PRETRAIN,
    PRETRAIN_PASSIVE_LOSS,
    SERVER,
    SPLIT_LEARNING,
    STATISTICS,
    WEIGHTS,
    Federation,
    Message,
    Traffic,
)
from vflpriv.methods.base import SHARED_LOOP, Method
from vflpriv.methods.pretraining import (
    Flavour,
    LocalSSL,
    PairLoss,
    SSLOptions,
    build_tower,
    make_pretrain_optimizer,
    mean_loss,
    pair_loss,
    party_augmenter,
    with_defenses,
)
from vflpriv.methods.towers import PooledEncoder, Tower, build_local_encoder
from vflpriv.models.encoders import build_encoder
from vflpriv.models.ssl import nt_xent
from vflpriv.models.training import Optimizer, index_batches, set_cosine_lr

PMAModule = Literal["top", "projector", "predictor"]


class CrossOptions(SSLOptions):
    """FedCSSL settings (step 1); the FedGSSL/FedHSSL options extend these."""

    global_iterations: int = Field(4, ge=1, description="global iterations (paper: 40; 10 for NUS-WIDE)")
    cross_epochs: int = Field(1, ge=1, description="epochs of cross-party SSL per global iteration (paper: 1)")
    local_updates: int = Field(
        1, ge=1, description="e: local updates per exchanged representation (FedBCD-style; paper Fig. 7: 1, 4, 8)"
    )
    cross_augment: bool = Field(False, description="augment the aligned samples in step 1 (code: raw features)")
    moco_cross_loss: Literal["nt-xent", "info-nce"] = Field(
        "nt-xent", description="MoCo's step-1 loss: nt-xent = NT-Xent over [own batch; received batch], 2B x "
        "(2B-1) logits, both directions (code); info-nce = one-way B x B InfoNCE, received keys as negatives")

    def ssl_epochs(self) -> int:
        return self.global_iterations * self.cross_epochs


class GuidedOptions(CrossOptions):
    """FedGSSL settings (steps 1 + 2)."""

    gamma: float = Field(0.5, ge=0, description="weight of the cross-party guidance in Eq. 6 (paper: 0.5)")
    local_epochs: int = Field(1, ge=1, description="epochs of guided local SSL per global iteration (paper: 1)")
    pooling: Literal["mean", "concat"] = Field(
        "mean", description="finetuning representation: mean = 0.5 f_c + 0.5 f_l (code), concat = [f_c, f_l]"
    )
    guidance_mode: Literal["train", "eval"] = Field(
        "train", description="mode of the cross branch computing Eq. 6's guidance target: train (code: batch "
        "statistics, running statistics refreshed on local rows) or eval (running statistics; measured -0.017 to "
        "-0.021 probe and -0.031 finetune accuracy on Fashion-MNIST, shared/FEDHSSL-CODE.md R1)")

    def guidance(self) -> float:
        return self.gamma

    def ssl_epochs(self) -> int:
        return self.global_iterations * self.local_epochs


class HybridOptions(GuidedOptions):
    """FedHSSL settings (steps 1 + 2 + 3)."""

    pma_top_blocks: int | None = Field(
        None, ge=1, description="trailing stages of f_l that form the shared top f_lt; unset = the last stage of an "
        "MLP (paper: top layer, tabular), the last 3 of the CNN's 4 (conv2, conv3, head: as the code shares "
        "ResNet-18's layer2-4 + fc)")
    pma_modules: list[PMAModule] = Field(
        default_factory=lambda: ["top", "projector", "predictor"],
        description="what PMA averages: local top encoder, local projector, local predictor (MoCo has none)",
    )
    pma_statistics: bool = Field(
        True, description="PMA averages the shared modules' BatchNorm running statistics too (code); false keeps "
        "each party's own (FedBN-style: parties whose data differ, as two halves of an image do, keep their own)")


def cross_loss(flavour: Flavour, options: CrossOptions) -> PairLoss:
    """L_SSL(p_c^k, z_c^j) of Eq. 5: Table II's loss; MoCo's has no queue in step 1 and is NT-Xent over the
    party's own and the received batch as in the code (``moco_cross_loss``)."""
    if flavour == "moco" and options.moco_cross_loss == "nt-xent":
        return partial(nt_xent, temperature=options.temperature)
    return pair_loss(flavour, options)


class FederatedSSL(Method):
    """Cross-party SSL (+ guided local SSL) (+ PMA), one class per (steps, SSL method) pair."""

    Options: ClassVar[type[CrossOptions]] = CrossOptions
    pretrains: ClassVar[bool] = True
    flavour: ClassVar[Flavour] = "simsiam"
    guided: ClassVar[bool] = False
    aggregates: ClassVar[bool] = False
    #: Cross-party SSL exchanges z_c both ways in pretraining; then split learning.
    sends: ClassVar[Traffic] = SPLIT_LEARNING | {("active", EMBEDDING, PRETRAIN), ("passive", EMBEDDING, PRETRAIN)}
    #: The shared finetuning loop, and a passive party's defenses in its cross-party and local SSL steps.
    supports: ClassVar[frozenset[str]] = SHARED_LOOP | {PRETRAIN_PASSIVE_LOSS}

    def __init__(self, options: CrossOptions):
        super().__init__(options)
        self.history: list[dict[str, list[float]]] = []

    # -------------------------------------------------------------------------------------- models

    def _towers(self, fed: Federation, seed: int) -> tuple[list[Tower], list[Tower]]:
        """Per party: the cross tower (f_c, g_c, h_c) and, when guided, the local tower (f_l, g_l, h_l)."""
        opts = self.options
        cross, local = [], []
        for p in fed.parties:
            g = seeded_generator(seed, f"pretrain:init:{p.index}")
            cross.append(build_tower(build_encoder(p.spec, fed.model, generator=g), self.flavour, opts, generator=g))
            if self.guided:
                top = opts.pma_top_blocks if isinstance(opts, HybridOptions) else None
                enc = build_local_encoder(p.spec, fed.model, top_blocks=top, generator=g)
                local.append(build_tower(enc, self.flavour, opts, generator=g))
        return [t.to(fed.device) for t in cross], [t.to(fed.device) for t in local]

    def _finetune_encoders(self, cross: list[Tower], local: list[Tower]) -> list[nn.Module]:
        if not self.guided:
            return [t.encoder for t in cross]
        return [PooledEncoder(c.encoder, l.encoder, self.options.pooling) for c, l in zip(cross, local)]

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
        return self._finetune_encoders(*self._towers(fed, 0))

    # ------------------------------------------------------------------------------------ pretrain

    def pretrain(self, fed: Federation) -> list[nn.Module]:
        opts = self.options
        seed = fed.generator.initial_seed()
        cross, local = self._towers(fed, seed)
        cross_opt = [make_pretrain_optimizer(t, opts) for t in cross]
        states = [
            LocalSSL.create(self.flavour, opts, t, p.x_train[p.local_ids], p.spec, seed=seed,
                            stream=f"pretrain:local:{p.index}", device=fed.device, party=p.index, hooks=fed.hooks)
            for p, t in zip(fed.parties, local)
        ]
        cross_views = None
        if opts.cross_augment:
            cross_views = [
                (party_augmenter(p.spec, p.x_train[p.local_ids], opts),
                 seeded_generator(seed, f"pretrain:cross:views:{p.index}"))
                for p in fed.parties
            ]
        batches = seeded_generator(seed, "pretrain:cross:batches")
        total = opts.global_iterations
        history: list[Tensor] = []
        for it in range(total):
            for opt in cross_opt + [s.optimizer for s in states]:
                set_cosine_lr(opt, it, total)
            cross_losses = [[] for _ in fed.parties]
            for _ in range(opts.cross_epochs):
                self._cross_epoch(fed, cross, cross_opt, cross_losses, batches, cross_views, it)
            row = [mean_loss(lst) for lst in cross_losses]
            if self.guided:
                local_losses = [[] for _ in fed.parties]
                for _ in range(opts.local_epochs):
                    for p, state, c in zip(fed.parties, states, cross):
                        local_losses[p.index] += state.epoch(p.x_train, p.local_ids, cross=c, gamma=opts.gamma,
                                                             guide_mode=opts.guidance_mode)
                row += [mean_loss(lst) for lst in local_losses]
            if self.aggregates:
                self._aggregate(fed, states, it)
            history.append(torch.stack(row))
        k = len(fed.parties)
        self.history = [
            {"cross": values[:k], **({"local": values[k:]} if self.guided else {})}
            for values in torch.stack(history).tolist()  # one sync at the end
        ]
        return self._finetune_encoders(cross, local)

    def _cross_epoch(
        self,
        fed: Federation,
        towers: list[Tower],
        optimizers: list[Optimizer],
        losses: list[list[Tensor]],
        batches: torch.Generator,
        views: list | None,
        it: int,
    ) -> None:
        """Step 1 over the aligned samples: one exchange per batch, ``local_updates`` updates per exchange."""
        opts = self.options
        loss_fn = cross_loss(self.flavour, opts)
        parties = fed.parties
        for t in towers:
            t.train()
        for batch in index_batches(fed.aligned, batch_size=opts.batch_size, generator=batches):
            xs = [p.x_train[batch] for p in parties]
            if views is not None:
                xs = [aug(x, g) for x, (aug, g) in zip(xs, views)]
            outs = [t.stages(x) for t, x in zip(towers, xs)]
            z_active = outs[ACTIVE][1]
            at_passive = {
                p.index: fed.channel.send(Message(EMBEDDING, PRETRAIN, ACTIVE, p.index, z_active, batch, it))
                for p in fed.passive
            }
            at_active = [
                fed.channel.send(Message(EMBEDDING, PRETRAIN, p.index, ACTIVE, outs[p.index][1], batch, it))
                for p in fed.passive
            ]
            for update in range(opts.local_updates):
                for k, (tower, opt) in enumerate(zip(towers, optimizers)):
                    h, _, pred = outs[k] if update == 0 else tower.stages(xs[k])
                    if k == ACTIVE:
                        loss = torch.stack([loss_fn(pred, z) for z in at_active]).mean()
                    else:
                        loss = loss_fn(pred, at_passive[k])
                    opt.zero_grad(set_to_none=True)
                    with_defenses(loss, fed.hooks, k, xs[k], h).backward()
                    opt.step()
                    losses[k].append(loss.detach())

    # ---------------------------------------------------------------------------------------- PMA

    def _shared(self, state: LocalSSL) -> dict[str, nn.Module]:
        tower = state.tower
        modules = {"top": tower.encoder.top, "projector": tower.projector, "predictor": tower.predictor}
        return {name: modules[name] for name in dict.fromkeys(self.options.pma_modules) if modules[name] is not None}

    def _aggregate(self, fed: Federation, states: list[LocalSSL], it: int) -> None:
        """Step 3: upload the shared modules' state, average at the server, download.

        Three messages each way per party: the local top encoder's parameters (kind ``weights``: what the
        paper's ISO protects in PMA, FedHSSL §VI-B), the projector's and predictor's parameters (kind
        ``head-weights``: protected only when a defense lists that kind) and the BatchNorm running
        statistics of all of them (kind ``statistics``: averaged too, but not parameters, and noise on a
        running variance can turn it negative, which makes the encoder output NaN).
        """
        shared = [self._shared(s) for s in states]
        parts = (
            (WEIGHTS, _parameters, ("top",)),
            (HEAD_WEIGHTS, _parameters, ("projector", "predictor")),
            *([(STATISTICS, _statistics, ("top", "projector", "predictor"))] if self.options.pma_statistics else []),
        )
        for kind, tensors, names in parts:
            chosen = [{n: m for n, m in modules.items() if n in names} for modules in shared]
            if not tensors(chosen[0]):
                continue
            uploads = [
                fed.channel.send(Message(kind, PRETRAIN, p.index, SERVER, tensors(modules), None, it))
                for p, modules in zip(fed.parties, chosen)
            ]
            average = {key: torch.stack([u[key] for u in uploads]).mean(dim=0) for key in uploads[0]}
            for p, modules in zip(fed.parties, chosen):
                received = fed.channel.send(Message(kind, PRETRAIN, SERVER, p.index, average, None, it))
                with torch.no_grad():
                    for key, t in tensors(modules).items():
                        t.copy_(received[key])


def _parameters(modules: dict[str, nn.Module]) -> dict[str, Tensor]:
    return {f"{name}.{key}": t for name, m in modules.items() for key, t in m.named_parameters()}


def _statistics(modules: dict[str, nn.Module]) -> dict[str, Tensor]:
    """Floating-point buffers (BatchNorm running mean and variance; not the integer batch counter)."""
    return {f"{name}.{key}": t for name, m in modules.items() for key, t in m.named_buffers() if t.is_floating_point()}


def _variant(name: str, base: type[FederatedSSL], flavour: Flavour, doc: str) -> type[FederatedSSL]:
    return type(name, (base,), {"flavour": flavour, "__doc__": doc, "__module__": __name__})


class FedCSSL(FederatedSSL):
    """FedCSSL: cross-party SSL only; finetunes the cross encoders f_c."""

    Options = CrossOptions


class FedGSSL(FederatedSSL):
    """FedGSSL: cross-party SSL + cross-party-guided local SSL; finetunes 0.5 f_c + 0.5 f_l."""

    Options = GuidedOptions
    guided = True
    revision = 1  # 1: the guidance target in train mode, as the code (0: eval mode)


class FedHSSL(FederatedSSL):
    """FedHSSL: cross-party SSL + guided local SSL + partial model aggregation."""

    Options = HybridOptions
    guided = True
    aggregates = True
    revision = 1  # 1: the guidance target in train mode, as the code (0: eval mode)
    #: PMA: every party uploads its shared modules, the server sends the averages back.
    sends = FederatedSSL.sends | {(who, kind, PRETRAIN) for who in ("active", "passive", "server")
                                  for kind in (WEIGHTS, HEAD_WEIGHTS, STATISTICS)}


CSSLSimSiam = _variant("CSSLSimSiam", FedCSSL, "simsiam", "FedCSSL-SimSiam.")
CSSLBYOL = _variant("CSSLBYOL", FedCSSL, "byol", "FedCSSL-BYOL (cross step without EMA target, as the code).")
CSSLMoCo = _variant("CSSLMoCo", FedCSSL, "moco", "FedCSSL-MoCo (cross step: in-batch NT-Xent, as the code).")
GSSLSimSiam = _variant("GSSLSimSiam", FedGSSL, "simsiam", "FedGSSL-SimSiam.")
GSSLBYOL = _variant("GSSLBYOL", FedGSSL, "byol", "FedGSSL-BYOL.")
GSSLMoCo = _variant("GSSLMoCo", FedGSSL, "moco", "FedGSSL-MoCo.")
FedHSSLSimSiam = _variant("FedHSSLSimSiam", FedHSSL, "simsiam", "FedHSSL-SimSiam (the ``fedhssl`` default).")
FedHSSLBYOL = _variant("FedHSSLBYOL", FedHSSL, "byol", "FedHSSL-BYOL.")
FedHSSLMoCo = _variant("FedHSSLMoCo", FedHSSL, "moco", "FedHSSL-MoCo.")
